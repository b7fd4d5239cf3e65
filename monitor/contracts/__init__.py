"""What convmon promises to the outside and to ``distill``: events, score records, rubric sets, errors,
settings (``CONVMON_*``) and metric names. Nothing here imports the runtime."""
