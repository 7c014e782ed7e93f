"""The default sample corpus, shipped with the code: ``default_corpus.tar.xz`` holds what
``generate_corpus`` and ``simulate_predictions`` write with their default arguments (``corpus/`` and
``corpus-predictions/``, compressed), so the first ``make run`` unpacks it instead of tracing four
toy memory systems, which takes many times longer.

Generation is deterministic (same arguments, same bytes), and tests/test_sample_corpus.py holds the
archive equal to a fresh generation: after a change to the generator, remake it with
``make sample-archive`` (``python -m pipelines.sample.archive``).
"""

from __future__ import annotations

import io
import lzma
import tarfile
import tempfile
from pathlib import Path

ARCHIVE = Path(__file__).with_name("default_corpus.tar.xz")
FOLDERS = ("corpus", "corpus-predictions")


def generate_into(root: Path) -> None:
    """What the archive holds, generated afresh under ``root``."""
    from pipelines.sample.corpus import generate_corpus
    from pipelines.sample.predictions import simulate_predictions

    generate_corpus(root / "corpus")
    simulate_predictions(root / "corpus", root / "corpus-predictions")


def files_under(root: Path) -> dict[str, bytes]:
    """Every file of the archive's folders under ``root``, by its relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for folder in FOLDERS for p in sorted((root / folder).rglob("*")) if p.is_file()}


def members(path: Path = ARCHIVE) -> dict[str, bytes]:
    """Every file the archive holds, by its relative path."""
    with tarfile.open(path, "r:xz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def write_archive(path: Path = ARCHIVE) -> Path:
    """Generate the default corpus and write it as a reproducible archive (sorted names, no times
    or owners)."""
    with tempfile.TemporaryDirectory() as tmp:
        generate_into(Path(tmp))
        files = files_under(Path(tmp))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    return path


def unpack(folders: dict[str, Path], path: Path = ARCHIVE) -> bool:
    """Write each of the archive's folders named (corpus, corpus-predictions) as the path given for
    it, in one pass (decompressing the archive is most of the work); False when there is no archive (a
    checkout without it generates instead)."""
    if not path.is_file():
        return False
    with tarfile.open(path, "r:xz") as tar:
        for member in tar.getmembers():
            folder = member.name.split("/", 1)[0]
            if member.isfile() and folder in folders:
                target = folders[folder] / member.name.removeprefix(f"{folder}/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
    return True


if __name__ == "__main__":
    written = write_archive()
    print(f"wrote {written} ({written.stat().st_size / 1e6:.2f} MB, {len(members(written))} files)")
