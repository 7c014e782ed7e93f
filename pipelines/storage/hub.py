"""Download the benchmark datasets from the Hugging Face Hub and record which revision was taken.

``fetch`` wraps ``huggingface_hub.snapshot_download`` (one call, ``allow_patterns`` per split) and
writes ``<dest>/.tracehouse-fetch.json`` with the repository, the resolved commit and the time,
so a later check can tell whether the Hub has a newer revision. With ``HF_HUB_OFFLINE=1`` the
same code reads a local Hub cache; without network the error says what to do.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RECORD = ".tracehouse-fetch.json"


@dataclass(frozen=True)
class HubDataset:
    repo_id: str
    allow_patterns: tuple[str, ...]


# What each source kind fetches. TracerTraj is published on GitHub, not on the Hub: give --repo-id.
DATASETS = {
    "memtracebench": HubDataset(
        "zjunlp/MemTraceBench", ("rag/*.json", "mem0/*.json", "evermemos/*.json", "long_context/*.json")
    ),
    "whowhen": HubDataset("Kevin355/Who_and_When", ("Algorithm-Generated/*.json", "Hand-Crafted/*.json")),
    "tracertraj": HubDataset("", ("*.parquet", "*.json", "*.jsonl")),
}


class HubError(RuntimeError):
    """The Hub could not be reached or the dataset is not there; the message says what to do."""


@dataclass
class FetchRecord:
    kind: str
    repo_id: str
    revision: str
    requested_revision: str | None
    allow_patterns: list[str]
    fetched_at: str
    files: int


def dataset_for(kind: str, repo_id: str | None) -> HubDataset:
    if kind not in DATASETS:
        raise HubError(f"unknown dataset {kind!r}; use one of: {', '.join(DATASETS)}")
    dataset = DATASETS[kind]
    if repo_id:
        return HubDataset(repo_id, dataset.allow_patterns)
    if not dataset.repo_id:
        raise HubError(f"{kind} has no Hugging Face repository by default: pass --repo-id OWNER/NAME")
    return dataset


def recorded(dest: Path) -> FetchRecord | None:
    path = dest / RECORD
    return FetchRecord(**json.loads(path.read_text())) if path.is_file() else None


def remote_revision(kind: str, repo_id: str | None = None, revision: str = "main") -> str:
    """The commit the Hub serves for ``revision`` now (for the scheduled new-revision check)."""
    from huggingface_hub import HfApi

    dataset = dataset_for(kind, repo_id)
    try:
        return HfApi().dataset_info(dataset.repo_id, revision=revision).sha
    except Exception as exc:  # noqa: BLE001 - every failure becomes one clear message
        raise _explain(exc, dataset.repo_id) from None


def fetch(kind: str, dest: Path, revision: str | None = None, repo_id: str | None = None,
          cache_dir: Path | None = None) -> FetchRecord:
    """Download (or take from the local Hub cache) one dataset into ``dest``."""
    from huggingface_hub import snapshot_download

    dataset = dataset_for(kind, repo_id)
    try:
        snapshot = Path(
            snapshot_download(
                repo_id=dataset.repo_id,
                repo_type="dataset",
                revision=revision,
                allow_patterns=list(dataset.allow_patterns),
                cache_dir=str(cache_dir) if cache_dir else None,
            )
        )
    except Exception as exc:  # noqa: BLE001
        raise _explain(exc, dataset.repo_id) from None
    dest.mkdir(parents=True, exist_ok=True)
    files = 0
    for path in sorted(snapshot.rglob("*")):
        rel = path.relative_to(snapshot).as_posix()
        wanted = any(fnmatch.fnmatch(rel, pattern) for pattern in dataset.allow_patterns)
        if path.is_file() and not path.name.startswith(".") and wanted:  # a cached snapshot may hold more
            target = dest / path.relative_to(snapshot)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.stat().st_size != path.stat().st_size or _differs(path, target):
                tmp = target.with_name(f".{target.name}.tmp")
                shutil.copyfile(path, tmp)
                os.replace(tmp, target)
            files += 1
    record = FetchRecord(
        kind=kind,
        repo_id=dataset.repo_id,
        revision=snapshot.name,  # snapshot folders are named by the resolved commit
        requested_revision=revision,
        allow_patterns=list(dataset.allow_patterns),
        fetched_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        files=files,
    )
    tmp = dest / f"{RECORD}.tmp"
    tmp.write_text(json.dumps(asdict(record), indent=1))
    os.replace(tmp, dest / RECORD)
    return record


def _differs(a: Path, b: Path) -> bool:
    return a.read_bytes() != b.read_bytes()


def _explain(exc: Exception, repo_id: str) -> HubError:
    name = type(exc).__name__
    if os.environ.get("HF_HUB_OFFLINE") in {"1", "true", "True"} or "LocalEntryNotFound" in name:
        return HubError(
            f"{repo_id} is not in the local Hugging Face cache and the Hub is offline ({name}): "
            "fetch it on a machine with network access and copy the cache (~/.cache/huggingface) "
            "or the files, then run `tracehouse build --source KIND=PATH`"
        )
    if "RepositoryNotFound" in name or "RevisionNotFound" in name:
        return HubError(f"{repo_id}: {exc}")
    return HubError(
        f"cannot reach the Hugging Face Hub for {repo_id} ({name}: {str(exc).splitlines()[0][:200]}); "
        "check the network, or set HF_HUB_OFFLINE=1 to read a local Hub cache"
    )
