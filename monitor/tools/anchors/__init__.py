"""`convmon anchors`: the human-labelled anchor set, its re-judging owner and the judge-drift verdict."""
