"""The tiny "fact language" the sample dialogues are written in and the toy models read.

Every personal fact is a chain of events on one (subject, slot): introduced, maybe updated, maybe
retracted. Each event is said in one first-person sentence from a small set of templates, and the
memory systems store what they extract in one canonical third-person form
(``"Caroline's home city is Porto (previously Lisbon)"``). Because both forms are regular, the toy
extractors and the toy reader can be exact: a non-faulted pipeline answers correctly, and a failure
only happens where a fault is injected. Filler text never contains a slot noun, so it can neither
be mistaken for a fact nor steer lexical retrieval.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Slot noun -> value pool. The noun's words appear in every template and question of the slot.
SLOTS: dict[str, tuple[str, ...]] = {
    "home city": ("Lisbon", "Porto", "Denver", "Austin", "Kyoto", "Oslo", "Melbourne", "Toronto",
                  "Nairobi", "Seville", "Chicago", "Munich"),
    "job title": ("nurse", "data analyst", "carpenter", "pastry chef", "teacher", "architect",
                  "paramedic", "translator", "line cook", "tax advisor"),
    "employer": ("Northwind", "Globex", "Initech", "Umbrella Health", "Stark Logistics", "Hooli",
                 "Vandelay Imports", "Cyberdyne Labs"),
    "pet dog": ("Rex", "Biscuit", "Luna", "Max", "Pepper", "Waffles", "Juniper", "Scout"),
    "car": ("Honda Civic", "Subaru Outback", "Tesla Model 3", "Ford Ranger", "Mini Cooper",
            "Toyota Prius", "Volvo XC40"),
    "hobby": ("pottery", "rock climbing", "salsa dancing", "birdwatching", "chess", "sourdough baking",
              "woodworking", "kayaking"),
    "instrument": ("cello", "ukulele", "piano", "drums", "violin", "saxophone", "banjo"),
    "favorite food": ("ramen", "paella", "tacos", "pho", "lasagna", "falafel", "dumplings"),
    "gym membership": ("Iron Temple", "FlexZone", "Peak Fitness", "Core Collective", "Urban Strength"),
    "book club pick": ("Dune", "Middlemarch", "Beloved", "The Overstory", "Piranesi", "Circe"),
    "language course": ("Japanese", "Portuguese", "Swahili", "Korean", "Italian", "Turkish"),
    "favorite band": ("The Lumineers", "Khruangbin", "Alvvays", "Big Thief", "IDLES",
                      "Phoenix"),
    "volunteer role": ("soup kitchen driver", "museum guide", "library tutor", "animal shelter walker",
                       "beach cleanup lead"),
    "running goal": ("a 10K", "a half marathon", "a full marathon", "a trail ultra", "a 5K"),
}

# Slots whose fact can be retracted ("I no longer have a pet dog").
RETRACTABLE: frozenset[str] = frozenset(
    {"employer", "pet dog", "car", "hobby", "instrument", "gym membership", "language course",
     "volunteer role"}
)

INTRO_TEMPLATES = (
    "My {noun} is {v} these days.",
    "Quick update on me: my {noun} is {v}.",
    "Oh, and my {noun} is {v}, by the way.",
)
UPDATE_TEMPLATES = (
    "I switched my {noun} from {old} to {new}.",
    "My {noun} changed from {old} to {new} recently.",
)
RETRACT_TEMPLATES = (
    "I no longer have a {noun}; {v} is out of the picture.",
    "No {noun} for me anymore since {v} ended.",
)

QUESTION_TEMPLATES: dict[str, tuple[str, ...]] = {
    "current": ("What is {poss} {noun} now?", "What is {poss} current {noun}?"),
    "previous": ("What was {poss} {noun} before it changed?",
                 "What {noun} did {subj} have before the latest change?"),
    "retracted": ("{aux} {subj} still have a {noun}?",),
}

UNKNOWN_ANSWER = "I don't know."

_VALUE = r"[^.,;!?()\[\]\n]+?"
_NOUN_ALT = "|".join(re.escape(n) for n in sorted(SLOTS, key=len, reverse=True))


def _compile(template: str, noun: str | None) -> re.Pattern[str]:
    """Turn a sentence template into a regex with named groups for its placeholders."""
    out = re.escape(template)
    if noun is not None:
        out = out.replace(re.escape("{noun}"), re.escape(noun))
    for key in ("v", "old", "new"):
        out = out.replace(re.escape("{" + key + "}"), f"(?P<{key}>{_VALUE})")
    out = out.replace(re.escape("{noun}"), f"(?P<noun>{_NOUN_ALT})")
    out = out.replace(re.escape("{poss}"), r"(?P<poss>my|[A-Z][\w-]*'s)")
    out = out.replace(re.escape("{subj}"), r"(?P<subj>I|[A-Z][\w-]*)")
    out = out.replace(re.escape("{aux}"), r"(?:Do|Does)")
    return re.compile(out)


@dataclass(frozen=True)
class FactEvent:
    """One event of a fact chain as said in a dialogue message."""

    subject: str
    slot: str
    kind: str  # "intro" | "update" | "retract"
    value: str | None  # the value after the event (None after a retraction)
    old: str | None  # the value before the event
    sentence: str


def render_event(subject: str, slot: str, kind: str, value: str | None, old: str | None,
                 template_index: int) -> FactEvent:
    """Say one fact event as a first-person sentence."""
    if kind == "intro":
        text = INTRO_TEMPLATES[template_index % len(INTRO_TEMPLATES)].format(noun=slot, v=value)
    elif kind == "update":
        text = UPDATE_TEMPLATES[template_index % len(UPDATE_TEMPLATES)].format(noun=slot, old=old, new=value)
    elif kind == "retract":
        text = RETRACT_TEMPLATES[template_index % len(RETRACT_TEMPLATES)].format(noun=slot, v=old)
    else:
        raise ValueError(f"unknown fact event kind {kind!r}")
    return FactEvent(subject, slot, kind, value, old, text)


def canonical(subject: str, slot: str, value: str | None, previous: str | None) -> str:
    """The canonical memory text of a (subject, slot) state, as extractors write it."""
    text = f"{subject}'s {slot} is {value if value is not None else 'none'}"
    if previous is not None:
        text += f" (previously {previous})"
    return text


@dataclass(frozen=True)
class SlotPatterns:
    """Compiled patterns of one slot: first-person events and the canonical form."""

    intro: tuple[re.Pattern[str], ...]
    update: tuple[re.Pattern[str], ...]
    retract: tuple[re.Pattern[str], ...]
    canonical: re.Pattern[str]


def _slot_patterns(noun: str) -> SlotPatterns:
    canon = re.compile(
        r"(?P<subject>[\w-]+)'s " + re.escape(noun) + rf" is (?P<v>{_VALUE})"
        rf"(?: \(previously (?P<old>{_VALUE})\))?(?=$|\n| \||\")",
        re.MULTILINE,
    )
    return SlotPatterns(
        intro=tuple(_compile(t, noun) for t in INTRO_TEMPLATES),
        update=tuple(_compile(t, noun) for t in UPDATE_TEMPLATES),
        retract=tuple(_compile(t, noun) for t in RETRACT_TEMPLATES),
        canonical=canon,
    )


PATTERNS: dict[str, SlotPatterns] = {noun: _slot_patterns(noun) for noun in SLOTS}
_QUESTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, _compile(t, None)) for kind, ts in QUESTION_TEMPLATES.items() for t in ts
)


def parse_sentence_events(text: str, slot: str) -> list[tuple[int, str, str | None, str | None]]:
    """First-person events of one slot in ``text``: (offset, kind, value, old), in text order."""
    pats = PATTERNS[slot]
    found: list[tuple[int, str, str | None, str | None]] = []
    for pat in pats.intro:
        found.extend((m.start(), "intro", m["v"], None) for m in pat.finditer(text))
    for pat in pats.update:
        found.extend((m.start(), "update", m["new"], m["old"]) for m in pat.finditer(text))
    for pat in pats.retract:
        found.extend((m.start(), "retract", None, m["v"]) for m in pat.finditer(text))
    found.sort(key=lambda e: e[0])
    return found


def extract_events(text: str, speaker: str) -> list[FactEvent]:
    """All first-person fact events in a message, attributed to its speaker (an exact extractor)."""
    events: list[FactEvent] = []
    for slot in SLOTS:
        if slot not in text:
            continue
        for _, kind, value, old in parse_sentence_events(text, slot):
            events.append(FactEvent(speaker, slot, kind, value, old, ""))
    return events


@dataclass(frozen=True)
class ParsedQuestion:
    """What a question asks: whose slot, and which view of its history."""

    subject: str
    slot: str
    kind: str  # "current" | "previous" | "retracted"


def render_question(kind: str, subject: str, slot: str, first_person: bool, template_index: int) -> str:
    """Ask about one fact chain; first person ("my") for single-user assistant dialogues."""
    templates = QUESTION_TEMPLATES[kind]
    poss, subj, aux = ("my", "I", "Do") if first_person else (f"{subject}'s", subject, "Does")
    return templates[template_index % len(templates)].format(poss=poss, subj=subj, aux=aux, noun=slot)


def parse_question(question: str, user: str) -> ParsedQuestion | None:
    """Invert :func:`render_question`; "my"/"I" refer to ``user``."""
    for kind, pat in _QUESTION_PATTERNS:
        m = pat.fullmatch(question)
        if m is None:
            continue
        groups = m.groupdict()
        who = groups.get("poss") or groups.get("subj") or ""
        subject = user if who in ("my", "I") else who.removesuffix("'s")
        return ParsedQuestion(subject, m["noun"], kind)
    return None


# Filler: sentences free of every slot noun (checked at import), so they never look like facts.
FILLER = (
    "We spent most of the afternoon talking about the weather.",
    "The neighbours threw a loud party again last night.",
    "I finally cleaned out the garage over the weekend.",
    "My cousin sent a postcard from the coast.",
    "There was a long queue at the bakery this morning.",
    "I keep forgetting to water the tomatoes on the balcony.",
    "The train was delayed by twenty minutes because of a signal fault.",
    "We watched a documentary about deep sea creatures.",
    "I tried a new recipe for lentil soup and it turned out fine.",
    "The power went out for an hour during the storm.",
    "My sister called to talk about her wedding plans.",
    "I have been sleeping better since I stopped drinking coffee late.",
    "The farmers market had the first strawberries of the season.",
    "We repainted the hallway a pale shade of green.",
    "I lost my umbrella on the bus again.",
    "The kids next door are learning to ride bikes.",
    "Work has been hectic with the quarterly review coming up.",
    "I read an article about the history of lighthouses.",
    "We are thinking about a short trip to the mountains.",
    "The library extended its opening hours on weekends.",
    "I spent an evening sorting old photographs into albums.",
    "Our street is finally getting new streetlights.",
    "I picked up a jigsaw puzzle with two thousand pieces.",
    "The plumber came to fix the leaking kitchen tap.",
    "A friend from school got in touch after many years.",
    "I have been trying to drink more water during the day.",
    "We had a picnic by the river when the sun came out.",
    "The local theatre is staging an old comedy this month.",
    "I bought a secondhand desk for the spare room.",
    "Rain kept us indoors for most of the week.",
)
ASSISTANT_FILLER = (
    "That sounds like a lot to keep track of.",
    "Thanks for sharing that with me.",
    "It is great to hear how things are going.",
    "Let me know if you want to plan anything around that.",
    "That must have been quite an experience.",
    "I will keep that in mind for later.",
    "How did that make you feel?",
    "It sounds like you have had a busy stretch.",
    "Would you like some suggestions for the weekend?",
    "That is a good reminder to take things slowly.",
)
EPISODE_TOPICS = (
    "weekend plans", "family news", "the weather", "household chores", "local events",
    "cooking experiments", "travel ideas", "work deadlines", "old friends", "house repairs",
)


def _check_filler() -> None:
    """Filler and values share no word with any slot noun: they may neither look like a fact nor steer
    retrieval towards the wrong slot."""
    noun_words = {w for noun in SLOTS for w in re.findall(r"[a-z0-9]+", noun)}
    for sentence in FILLER + ASSISTANT_FILLER + EPISODE_TOPICS:
        clash = noun_words & set(re.findall(r"[a-z0-9]+", sentence.lower()))
        if clash:
            raise AssertionError(f"filler {sentence!r} shares words {sorted(clash)} with slot nouns")
    for values in SLOTS.values():
        for value in values:
            clash = noun_words & set(re.findall(r"[a-z0-9]+", value.lower()))
            if clash:
                raise AssertionError(f"slot value {value!r} shares words {sorted(clash)} with slot nouns")


_check_filler()
