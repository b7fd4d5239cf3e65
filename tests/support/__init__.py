"""What several test packages share: worker processes, topic I/O and read-back, model fixtures, local servers."""
