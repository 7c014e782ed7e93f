"""Deterministic multi-session dialogues in the style of LoCoMo, LongMemEval and RealMem.

A dialogue is a few sessions of messages. Personal facts are introduced, updated and retracted
across sessions (see :mod:`pipelines.sample.facts`); questions ask about the current value, the
value before the latest change, or whether a retracted fact still holds, so their evidence spans
sessions. Each asked chain is asked about once, and no other chain shares its slot,
which keeps an injected fault on one question from leaking into another. Every session also carries
at least one event of an unasked "distractor" chain, so a later session always has memory work in
which a wrong deletion can happen.

The three datasets differ in shape: ``locomo`` is two named speakers talking to each other,
``longmemeval`` is one user and an assistant over many short sessions (questions in the first person),
``realmem`` is one persona and an assistant over fewer, longer sessions. ``scale`` multiplies the
number of sessions and the length of every message.

Everything is drawn from a ``random.Random`` seeded by (seed, dataset, trajectory number).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from . import facts
from .facts import FactEvent

DATASETS: tuple[str, ...] = ("locomo", "longmemeval", "realmem")
DATASET_CLASSES: dict[str, str] = {
    "locomo": "LoCoMoDataset",
    "longmemeval": "LongMemEvalDataset",
    "realmem": "RealMemDataset",
}

FIRST_NAMES = (
    "Caroline", "Melanie", "Jon", "Gina", "Priya", "Tomas", "Aiko", "Mateo", "Nadia", "Oliver",
    "Fatima", "Lukas", "Imani", "Rafael", "Sofia", "Dmitri", "Keiko", "Samuel", "Elena", "Yusuf",
)
LAST_NAMES = ("Chen", "Okafor", "Silva", "Novak", "Haddad", "Lindqvist", "Moreau", "Tanaka",
              "Reyes", "Kowalski", "Mensah", "Fischer")
TRAITS = ("curious", "organised", "sociable", "introverted", "outdoorsy", "bookish", "sporty",
          "creative", "frugal", "adventurous")


@dataclass(frozen=True)
class Shape:
    """Per-dataset dialogue shape at scale 1."""

    sessions: tuple[int, int]
    turns: tuple[int, int]
    filler: tuple[int, int]  # filler sentences per message
    two_speakers: bool
    first_person_questions: bool


SHAPES: dict[str, Shape] = {
    "locomo": Shape(sessions=(2, 4), turns=(4, 8), filler=(1, 2), two_speakers=True,
                    first_person_questions=False),
    "longmemeval": Shape(sessions=(4, 6), turns=(2, 4), filler=(1, 2), two_speakers=False,
                         first_person_questions=True),
    "realmem": Shape(sessions=(2, 3), turns=(4, 6), filler=(2, 3), two_speakers=False,
                     first_person_questions=False),
}


@dataclass
class Message:
    """One dialogue turn, named by its message id (``U1:D2:5``)."""

    id: str
    session: int
    turn: int
    speaker: str
    text: str
    event: FactEvent | None = None

    @property
    def line(self) -> str:
        """How raw-message memories store the turn: id, speaker and text on one line."""
        return f"[{self.id}] {self.speaker}: {self.text}"


@dataclass
class DialogueSession:
    """One dialogue session; memory construction runs once per session."""

    index: int
    session_id: str
    date: str
    messages: list[Message]


@dataclass
class Question:
    """A question over a fact chain, with what the faults need to break it on purpose."""

    qid: str
    text: str
    kind: str  # "current" | "previous" | "retracted"
    subject: str
    slot: str
    golden: list[str]
    evidence: list[str]  # message ids of every event of the chain
    decisive: str  # message id of the chain's last event (the one the answer hinges on)
    decisive_session: int
    decisive_kind: str  # "intro" | "update" | "retract"
    stale_sentence: str  # what a stale write of the decisive message says instead
    wrong_answer: str  # a plausible wrong answer (for response and annotation faults)


@dataclass
class Dialogue:
    """A whole trajectory: speakers, sessions, questions and the runner's trajectory metadata."""

    dataset: str
    traj_no: int
    user_id: str
    user: str  # the subject "my"/"I" refers to in first-person questions
    speakers: list[str]
    sessions: list[DialogueSession]
    questions: list[Question]
    traj_metadata: dict = field(default_factory=dict)

    @property
    def messages(self) -> list[Message]:
        return [m for s in self.sessions for m in s.messages]


@dataclass
class _Chain:
    subject: str
    slot: str
    kind: str  # question kind, or "distractor"
    events: list[tuple[int, str, str | None, str | None]] = field(default_factory=list)


def _filler(rng: random.Random, pool: tuple[str, ...], n: int) -> str:
    return " ".join(rng.choices(pool, k=n))


def _user_id(dataset: str, traj_no: int, rng: random.Random, persona: str) -> str:
    if dataset == "locomo":
        return f"locomo-{traj_no}"
    if dataset == "longmemeval":
        return f"longmemeval-{rng.getrandbits(32):08x}"
    return f"realmem-{persona.lower().replace(' ', '-')}-{traj_no}"


def generate_dialogue(dataset: str, traj_no: int, seed: int = 0, scale: float = 1.0) -> Dialogue:
    """Build one dialogue; the same (dataset, traj_no, seed, scale) always gives the same dialogue."""
    if dataset not in SHAPES:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {DATASETS}")
    shape = SHAPES[dataset]
    rng = random.Random(f"sample-dialogue:{seed}:{dataset}:{traj_no}")

    names = rng.sample(FIRST_NAMES, 2)
    persona = f"{names[0]} {rng.choice(LAST_NAMES)}"
    if shape.two_speakers:
        speakers = names
        subjects = list(names)
        user = names[0]
    elif dataset == "longmemeval":
        speakers = ["user", "assistant"]
        subjects = ["user"]
        user = "user"
    else:
        speakers = [names[0], "assistant"]
        subjects = [names[0]]
        user = names[0]
    user_id = _user_id(dataset, traj_no, rng, persona)

    n_sessions = max(2, round(rng.randint(*shape.sessions) * scale))
    n_filler = (max(1, round(shape.filler[0] * scale)), max(1, round(shape.filler[1] * scale)))

    # Choose the asked chains and the distractor chains. Every chain has its own slot, whoever its
    # subject: lexical retrieval over raw two-speaker transcripts cannot tell whose "my home city" a
    # line is, so two chains on one slot would make the toy systems fail without a fault.
    slots = list(facts.SLOTS)
    rng.shuffle(slots)
    pairs = [(rng.choice(subjects), slot) for slot in slots]
    n_questions = min(3 + min(5, round(rng.expovariate(0.7))), len(pairs) - 1)
    chains: list[_Chain] = []
    for subject, slot in pairs[:n_questions]:
        kinds = ["current", "current", "previous"] + (["retracted"] if slot in facts.RETRACTABLE else [])
        chains.append(_Chain(subject, slot, rng.choice(kinds)))
    distractors = [_Chain(s, slot, "distractor") for s, slot in pairs[n_questions:]]
    n_distractors = min(len(distractors), max(1, min(n_sessions, rng.randint(2, 4))))
    distractors = distractors[:n_distractors]

    # Place events: (session, kind, value, old). Asked chains span sessions where they can.
    for chain in chains:
        pool = facts.SLOTS[chain.slot]
        v0 = rng.choice(pool)
        single = chain.kind == "current" and rng.random() < 0.3
        if single:
            chain.events.append((rng.randint(1, n_sessions), "intro", v0, None))
            continue
        a = rng.randint(1, n_sessions - 1)
        b = rng.randint(a + 1, n_sessions)
        chain.events.append((a, "intro", v0, None))
        if chain.kind == "retracted":
            chain.events.append((b, "retract", None, v0))
        else:
            v1 = rng.choice([v for v in pool if v != v0])
            chain.events.append((b, "update", v1, v0))
    # Every session gets an event of some distractor chain; a chain's first event is its intro.
    for s in range(1, n_sessions + 1):
        chain = rng.choice(distractors)
        pool = facts.SLOTS[chain.slot]
        if not chain.events:
            chain.events.append((s, "intro", rng.choice(pool), None))
        else:
            cur = chain.events[-1][2]
            chain.events.append((s, "update", rng.choice([v for v in pool if v != cur]), cur))

    # Lay the events out over turns spoken by their subject.
    by_session: dict[int, list[tuple[_Chain, int]]] = {}
    for chain in chains + distractors:
        for i, ev in enumerate(chain.events):
            by_session.setdefault(ev[0], []).append((chain, i))

    start = datetime(2023, 1, 2, 9, 0) + timedelta(days=rng.randint(0, 400), minutes=rng.randint(0, 600))
    sessions: list[DialogueSession] = []
    when = start
    event_msg: dict[tuple[int, int], Message] = {}  # (chain index, event index) -> message
    chain_index = {id(c): k for k, c in enumerate(chains + distractors)}
    for s in range(1, n_sessions + 1):
        placed = by_session.get(s, [])
        per_subject = {subj: sum(1 for c, _ in placed if c.subject == subj) for subj in subjects}
        turns = rng.randint(*shape.turns)
        if shape.two_speakers:
            turns = max(turns, 2 * max(per_subject.values()) + 1)
            first = rng.randint(0, 1)
            turn_speakers = [speakers[(first + t) % 2] for t in range(turns)]
        else:
            turns = max(turns, 2 * per_subject[subjects[0]])
            turn_speakers = [speakers[t % 2] for t in range(turns)]
        slots_by_speaker: dict[str, list[int]] = {}
        for t, sp in enumerate(turn_speakers):
            slots_by_speaker.setdefault(sp, []).append(t)
        assignment: dict[int, tuple[_Chain, int]] = {}
        for subj in subjects:
            mine = [(c, i) for c, i in placed if c.subject == subj]
            # Chain events keep their chain order inside a session (at most one per chain anyway).
            positions = sorted(rng.sample(slots_by_speaker.get(subj, []), len(mine)))
            for pos, item in zip(positions, mine, strict=True):
                assignment[pos] = item
        messages: list[Message] = []
        for t, sp in enumerate(turn_speakers):
            msg_id = f"U{traj_no}:D{s}:{t + 1}"
            pool = facts.ASSISTANT_FILLER if sp == "assistant" else facts.FILLER
            n_before = rng.randint(0, n_filler[1])
            n_after = rng.randint(n_filler[0], n_filler[1])
            event = None
            if t in assignment:
                chain, i = assignment[t]
                _, kind, value, old = chain.events[i]
                event = facts.render_event(chain.subject, chain.slot, kind, value, old, rng.randrange(3))
                parts = [_filler(rng, pool, n_before), event.sentence, _filler(rng, pool, n_after)]
                text = " ".join(p for p in parts if p)
            else:
                text = _filler(rng, pool, n_before + n_after)
            msg = Message(msg_id, s, t + 1, sp, text, event)
            if t in assignment:
                chain, i = assignment[t]
                event_msg[(chain_index[id(chain)], i)] = msg
            messages.append(msg)
        date = when.strftime("%Y-%m-%d %H:%M")
        sessions.append(DialogueSession(s, f"{user_id}-session-{s}", date, messages))
        when += timedelta(days=rng.randint(1, 20), minutes=rng.randint(-90, 90))

    questions: list[Question] = []
    for ci, chain in enumerate(chains):
        msgs = [event_msg[(ci, i)] for i in range(len(chain.events))]
        last = chain.events[-1]
        decisive = msgs[-1]
        pool = facts.SLOTS[chain.slot]
        if chain.kind == "current":
            golden = [last[2]]
            wrong = last[3] if last[3] is not None else rng.choice([v for v in pool if v != last[2]])
        elif chain.kind == "previous":
            golden = [last[3]]
            wrong = last[2]
        else:
            golden = ["No"] if rng.random() < 0.6 else ["No", "No longer"]
            wrong = "Yes"
        stale_value = last[3] if last[1] != "intro" else rng.choice([v for v in pool if v != last[2]])
        stale = facts.render_event(chain.subject, chain.slot, "intro", stale_value, None, rng.randrange(3))
        text = facts.render_question(chain.kind, chain.subject, chain.slot, shape.first_person_questions,
                                     rng.randrange(2))
        questions.append(Question(
            qid=f"{user_id}-q{len(questions) + 1}", text=text, kind=chain.kind, subject=chain.subject,
            slot=chain.slot, golden=golden, evidence=[m.id for m in msgs], decisive=decisive.id,
            decisive_session=decisive.session, decisive_kind=last[1], stale_sentence=stale.sentence,
            wrong_answer=wrong,
        ))

    traj_metadata: dict = {
        "dataset": dataset,
        "trajectory": traj_no,
        "speakers": speakers,
        "n_sessions": n_sessions,
        "n_messages": sum(len(s.messages) for s in sessions),
        "n_questions": len(questions),
        "question_types": {k: sum(q.kind == k for q in questions)
                           for k in ("current", "previous", "retracted")},
        "scale": scale,
    }
    if dataset == "realmem":
        traj_metadata["persona"] = {
            "name": persona,
            "age": rng.randint(22, 67),
            "traits": sorted(rng.sample(TRAITS, 3)),
        }
    return Dialogue(dataset, traj_no, user_id, user, speakers, sessions, questions, traj_metadata)
