"""Reader for the logs of Who&When's ``Automated_FA/inference.py`` (ag2ai/Agents_Failure_Attribution).

A log starts with a header (``--- Starting Analysis: <method> ---``, ..., ``Is Handcrafted:
True|False``) and holds one block per trajectory: ``Prediction for 12.json:`` then ``Agent Name:
X`` and ``Step Number: N``, and often a reason. Blocks, agent and step are read exactly as the
benchmark's scorer ``Automated_FA/evaluate.py`` reads them (the same regular expressions; a block
without both is not a prediction), so the legacy accuracy reproduces it. The subset (Hand-Crafted
or Algorithm-Generated) comes from the header, else from the file name (inference.py writes
``..._handcrafted.txt`` / ``..._alg_generated.txt``); ``12.json`` is that subset's file. The run's
cases are every annotation of the subset in the warehouse.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pipelines.readers.base import (
    MISSING_KEY,
    NO_RECORDS,
    NOT_UTF8,
    WRONG_FIELD_TYPE,
    Cases,
    GraphRows,
    IngestError,
    Rows,
    SourceFile,
    list_files,
)
from pipelines.readers.predictions import MULTI_AGENT_KINDS, prediction, resolve, scope
from pipelines.storage.warehouse import relative_name

kind = "whowhen_predictions"
needs_cases = True
SPLIT = "predictions"
SUBSETS = {"true": "Hand-Crafted", "false": "Algorithm-Generated"}

# evaluate.py's own expressions
BLOCK = re.compile(r"Prediction for ([^:]+\.json):(.*?)(?=Prediction for|\Z)", re.DOTALL)
AGENT = re.compile(r"Agent Name:\s*([\w_]+)", re.IGNORECASE)
STEP = re.compile(r"Step Number:\s*(\d+)", re.IGNORECASE)
HEADER = re.compile(r"^Is Handcrafted:\s*(True|False)\s*$", re.IGNORECASE | re.MULTILINE)
REASON = re.compile(r"(?:Reason for Mistake|Reason provided by LLM|Reason)\s*:\s*(.*?)(?:\n={5,}|\Z)",
                    re.IGNORECASE | re.DOTALL)


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()
    if root.is_file():
        return [SourceFile(source, SPLIT, root, root.name)]
    files = [*list_files(root, "**/*.txt"), *list_files(root, "**/*.log")]
    return sorted((SourceFile(source, SPLIT, p, relative_name(root, p)) for p in files),
                  key=lambda f: f.relpath)


def subset_of(text: str, file: SourceFile) -> str:
    header = HEADER.search(text[:4000])
    if header:
        return SUBSETS[header.group(1).lower()]
    name = file.path.stem.lower()
    if name.endswith("_handcrafted"):
        return "Hand-Crafted"
    if name.endswith("_alg_generated"):
        return "Algorithm-Generated"
    raise IngestError(MISSING_KEY, "the log names no Who&When subset: no 'Is Handcrafted:' header line and no "
                      "file name ending in _handcrafted or _alg_generated")


def read(file: SourceFile, cases: Cases) -> Iterator[GraphRows | Rows | IngestError]:
    try:
        text = file.path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(NOT_UTF8, "the log is not UTF-8 text", f"byte {exc.start}") from None
    subset = subset_of(text, file)
    yield scope(file, cases.graphs_of(MULTI_AGENT_KINDS, split=subset))
    blocks = list(BLOCK.finditer(text))
    if not blocks:
        raise IngestError(NO_RECORDS, "the log holds no 'Prediction for <file>.json:' block")
    for block in blocks:
        name, content = block.group(1).strip(), block.group(2)
        position = f"line {text.count(chr(10), 0, block.start()) + 1}"
        agent, step = AGENT.search(content), STEP.search(content)
        if not (agent and step):
            yield IngestError(WRONG_FIELD_TYPE, f"the prediction for {name} has no 'Agent Name:' and "
                              "'Step Number:' the scorer can read", position)
            continue
        found = [c for c in cases.by_file.get((subset, Path(name).name), []) if c.kind in MULTI_AGENT_KINDS]
        try:
            case = resolve(found, f"{subset}/{name}", position)
        except IngestError as error:
            yield error
            continue
        reason = REASON.search(content)
        yield prediction(file, case, position, agent=agent.group(1), step=int(step.group(1)),
                         reason=reason.group(1).strip() if reason else None)
