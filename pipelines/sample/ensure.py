"""The embedded default corpus and its simulated predictions, made in the warehouse the first time
a build needs them: unpacked from the shipped archive, else generated."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from pipelines.storage.warehouse import Warehouse


def ensure_sample_corpus(warehouse: Warehouse, say: Callable[[str], None] = lambda _: None) -> None:
    """Generate the embedded default corpus (and the simulated methods' predictions over it) into
    the warehouse the first time they are needed, saying how far it got about twice a second."""
    from pipelines.sample import archive

    corpus, predictions = warehouse.corpus_dir, warehouse.sample_predictions_dir
    wanted = {"corpus": corpus, "corpus-predictions": predictions}
    staging = {folder: final.with_name(f".{final.name}-{uuid.uuid4().hex[:8]}.tmp")
               for folder, final in wanted.items() if not final.is_dir()}
    if staging and archive.unpack(staging):  # the copy shipped with the code (pipelines/sample/archive.py)
        for folder, staged in staging.items():
            staged.rename(wanted[folder])  # a half-written folder is never mistaken for the real one
    if not corpus.is_dir():
        from pipelines.sample.corpus import generate_corpus

        last = [time.monotonic()]

        def progress(line: str) -> None:
            if time.monotonic() - last[0] >= 0.5:
                say(f"sample corpus {line}")
                last[0] = time.monotonic()

        staging = corpus.with_name(f".corpus-{uuid.uuid4().hex[:8]}.tmp")
        generate_corpus(staging, progress=progress)
        staging.rename(corpus)  # a half-generated corpus is never mistaken for the real one
    if not predictions.is_dir():
        from pipelines.sample.predictions import simulate_predictions

        staging = predictions.with_name(f".predictions-{uuid.uuid4().hex[:8]}.tmp")
        simulate_predictions(corpus, staging)
        staging.rename(predictions)
