"""`convmon simulate`: synthetic conversation event streams with known rubric ground truth."""
