"""convmon's offline and periodic learning: labels, featurizers, classifiers, registry, rubrics."""
