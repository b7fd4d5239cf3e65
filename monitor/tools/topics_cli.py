"""`convmon topics create | check`: convmon's Kafka topics on clusters where workers may not create them."""

from __future__ import annotations

import asyncio

import typer

from monitor.contracts.settings import load_settings

app = typer.Typer(help="Create or check convmon's Kafka topics (clusters with auto-create off).", no_args_is_help=True)


@app.command("create")
def create() -> None:
    """Create every missing convmon topic with its partitions, replication, retention and compaction."""
    from monitor.runtime.topics import convmon_topics, create_topics

    settings = load_settings()
    created = asyncio.run(create_topics(settings.kafka))
    for name in created:
        print(f"created {name}")
    print(f"{len(created)} created, {len(convmon_topics(settings.kafka)) - len(created)} already existed "
          f"on {settings.broker_url}; run `convmon topics check` to compare their configs")


@app.command("check")
def check() -> None:
    """Report missing or misconfigured topics, one line each; exit code 1 if there is any."""
    from monitor.runtime.topics import check_topics, convmon_topics

    settings = load_settings()
    problems = asyncio.run(check_topics(settings.kafka))
    for line in problems:
        print(line)
    if problems:
        raise typer.Exit(1)
    print(f"all {len(convmon_topics(settings.kafka))} convmon topics on {settings.broker_url} are as configured")
