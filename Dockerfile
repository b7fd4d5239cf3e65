# The convmon worker image used by docker-compose.yml and deploy/k8s/.
FROM python:3.11-slim
WORKDIR /app
# torch first and pinned to the CPU build; any other spec pulls multi-GB CUDA wheels.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY monitor monitor
COPY distill distill
COPY prompts prompts
RUN pip install --no-cache-dir .
ENV CONVMON_PROMPTS_DIR=/app/prompts HF_HUB_OFFLINE=1
EXPOSE 9100
ENTRYPOINT ["convmon"]
CMD ["worker"]
