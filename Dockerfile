# The convmon image used by docker-compose.yml and deploy/k8s/.
#
# Entry point convention: ENTRYPOINT is the `convmon` executable and everything after it is a
# subcommand, so compose `command:` and Kubernetes `args:` name only the subcommand and its options
# (`["worker"]`, `["simulate", "--rate", "5"]`, `["retrain", "--once"]`), never `convmon`.
FROM python:3.11-slim
WORKDIR /app
# Every convmon process runs on jemalloc (LD_PRELOAD below): under glibc's malloc a worker's resident memory
# grows in 8-12 MB steps that it never returns (fragmented arenas; 1-4.5 MB/min in 10-minute soaks), under
# jemalloc it stays flat (docs/reliability.md, "Soak"; monitor/runtime/allocator.py). The link gives one path
# on every architecture. To run on glibc's malloc instead, set LD_PRELOAD to an empty value.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjemalloc2 \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(ls /usr/lib/*-linux-gnu/libjemalloc.so.2)" /usr/local/lib/libjemalloc.so.2
# Freed pages go back after 1 s (jemalloc's default: 10 s), so RSS stays closer to live memory.
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:1000,muzzy_decay_ms:0
# torch first and pinned to the CPU build; any other spec pulls multi-GB CUDA wheels.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY monitor monitor
COPY distill distill
COPY prompts prompts
RUN pip install --no-cache-dir .
# The int8 ONNX MiniLM (CONVMON_EMBEDDING_BACKEND=onnx-int8), exported and quantized once here: workers run with
# a read-only root filesystem and only read it. Outside the home directory, which deploy/k8s mounts over.
ENV CONVMON_MODEL_CACHE_DIR=/opt/convmon/models
RUN HF_HUB_OFFLINE=1 convmon models build-onnx
# An unprivileged user (uid 10001, matching runAsUser in deploy/k8s) owning its home and state
# directory /var/lib/convmon, the working directory, so relative defaults (var/, convmon.toml) land there.
RUN groupadd --system --gid 10001 convmon \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/convmon --create-home --shell /usr/sbin/nologin convmon
ENV CONVMON_PROMPTS_DIR=/app/prompts HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /var/lib/convmon
EXPOSE 9100 9101
ENTRYPOINT ["convmon"]
CMD ["worker"]
