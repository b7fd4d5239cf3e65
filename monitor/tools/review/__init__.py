"""The review page (`convmon ui`) and human labels."""
