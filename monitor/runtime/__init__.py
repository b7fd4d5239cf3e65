"""faust app, thin agents, worker process, broker and Kafka helpers: decode, call a stage, send."""
