"""``convmon models``: prebuild local model files, so a worker on a read-only filesystem only reads them."""

from __future__ import annotations

import typer

from monitor.contracts.settings import load_settings

app = typer.Typer(help="Prebuild local model files (the int8 ONNX MiniLM).", no_args_is_help=True)


@app.callback()
def models() -> None:
    """Prebuild local model files (a callback keeps `build-onnx` a subcommand while it is the only one)."""


@app.command("build-onnx")
def build_onnx_command(
    force: bool = typer.Option(False, "--force", help="Rebuild even when the file exists."),
) -> None:
    """Export the packaged all-MiniLM-L6-v2 to ONNX, quantize it to int8, write it to CONVMON_MODEL_CACHE_DIR."""
    from distill.featurizers.minilm_onnx import build_onnx

    settings = load_settings()
    path, seconds = build_onnx(settings.model_cache_dir, force=force)
    print(f"{path} (built in {seconds:.1f} s)" if seconds else f"{path} (already built)")
