"""Featurizers with the scikit-learn transformer API, named by a spec string (``distill.featurizers.spec``)."""
