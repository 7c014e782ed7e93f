"""The dashboard's colours: fixed per value and shared by every chart, the page and the failure views.

One colour per system (:data:`SYSTEM_COLORS`, then a spare colour chosen by the system's name), one per
agent role (:data:`ROLE_COLORS`), one per error type, phase and common failure category, all from the
seed ``sql/seeds/colors.csv``; a categorical palette for categories the seed has none for, kept apart
in CIE Lab; the methods' colours of the leaderboard. Importing the module checks that the system and
role palettes are distinct.

Imports: the standard library and ``pipelines.schema`` (the seeds); Altair only inside the functions
that make a scale. Never another module of ``dashboards``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from pipelines import schema

if TYPE_CHECKING:  # only for annotations: the module never imports Altair itself
    import altair as alt


def seed_colors(dimension: str) -> dict[str, str]:
    """value -> colour of one dimension of sql/seeds/colors.csv, in the seed's order (the legend's):
    the one place a system, role, error type or stage has its colour."""
    return {r["value"]: r["color"] for r in schema.seed_rows("colors") if r["dimension"] == dimension}


# One colour per system of sql/seeds/systems.csv (colours in sql/seeds/colors.csv), distinct; other systems
# (smartcomment exports) take a spare colour chosen by their name, so a system has the same colour on every chart.
SYSTEM_COLORS = seed_colors("system")
SPARE_SYSTEM_COLORS = ("#2f4b7c", "#a05195", "#665191", "#ffa600", "#003f5c", "#d45087", "#7a5195", "#488f31")
# One colour per agent role of the seed (kind 'agent'), distinct, none a system's colour; grey for the
# folded row of the responsible_agents chart.
ROLE_COLORS = seed_colors("agent_role")
SPARE_ROLE_COLORS = ("#bab0ac", "#9d7660", "#c7e9c0", "#fdd0a2", "#dadaeb", "#c6dbef")
ERROR_COLORS = seed_colors("error_type")
SPARE_COLORS = ("#edc948", "#ff9da7", "#b07aa1", "#8cd17d", "#499894", "#d37295", "#a0cbe8", "#86bcb6")
# Colours for categories the seed has none for (AgentRx's or TRAIL's error types...), given in legend
# order: twelve hues whose every pair lies at least 20 apart in CIE Lab (tests/test_dashboard.py), so
# neighbouring legend entries never look alike. A chart shows at most CATEGORY_LIMIT categories: the
# smallest beyond are one 'other' block (OTHER_COLOR).
CATEGORICAL = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
               "#9c755f", "#1d3f6e", "#8f8c2e", "#7b2d6b")
CATEGORY_LIMIT = 12
OTHER_COLOR = "#7f7f7f"
DISTINCT_LAB = 20.0  # CIE76 distance below which two colours of one legend read as one
PHASE_COLORS = seed_colors("stage")
# One colour per common failure category of sql/seeds/failure_categories.csv, in its order, then
# 'unmapped' (black: a label the crosswalk lacks must stand out) and 'unlabelled'.
COMMON_CATEGORY_COLORS = seed_colors("common_category")
SPOKE_COLORS = {"agent acted in the step": "#4e79a7", "another agent acted": "#e15759", "unknown": "#bab0ac"}


def _spare(value: str, spare: tuple[str, ...], taken: set[str]) -> str:
    """A spare colour chosen by the value's name (the same on every chart), avoiding ``taken``."""
    start = int(hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16)
    for k in range(len(spare)):
        colour = spare[(start + k) % len(spare)]
        if colour not in taken:
            return colour
    return spare[start % len(spare)]


def fixed_colors(values: set[str] | list[str], known: dict[str, str], spare: tuple[str, ...]) -> dict[str, str]:
    """value -> colour: the known colour, else a spare one chosen by the value's name, distinct
    among the values given (as far as the spare colours go)."""
    colours = {v: known[v] for v in values if v in known}
    taken = set(colours.values())
    for value in sorted(set(values) - set(known)):
        colours[value] = _spare(value, spare, taken)
        taken.add(colours[value])
    return colours


def color_scale(values: set[str] | list[str], known: dict[str, str],
                spare: tuple[str, ...] = SPARE_COLORS) -> alt.Scale:
    """Fixed colours for known values (in their order), then spare colours for any others."""
    import altair as alt

    colours = fixed_colors(values, known, spare)
    domain = [v for v in known if v in colours] + sorted(set(colours) - set(known))
    return alt.Scale(domain=domain, range=[colours[v] for v in domain])


def lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of a '#rrggbb' colour."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def colour_distance(a: str, b: str) -> float:
    """CIE76 distance: about 2.3 is just noticeable; under DISTINCT_LAB two legend entries look alike."""
    return sum((p - q) ** 2 for p, q in zip(lab(a.lower()), lab(b.lower()), strict=True)) ** 0.5


def category_colors(values: list[str], known: dict[str, str]) -> dict[str, str]:
    """value -> colour for the categories of one chart, ``values`` in legend order: the known colour,
    else the next colour of :data:`CATEGORICAL` that no value took and that lies at least
    DISTINCT_LAB from every colour taken (known ones included), so that neighbours differ."""
    colours = {v: known[v] for v in values if v in known}
    taken = list(colours.values())
    for value in values:
        if value in colours:
            continue
        free = [c for c in CATEGORICAL if c not in taken]
        apart = [c for c in free if all(colour_distance(c, t) >= DISTINCT_LAB for t in taken)]
        colours[value] = (apart or free or [CATEGORICAL[len(taken) % len(CATEGORICAL)]])[0]
        taken.append(colours[value])
    return colours


def category_scale(values: list[str], known: dict[str, str]) -> alt.Scale:
    """The colour scale of one chart's categories (:func:`category_colors`): known values in the
    seed's order, then the others in the order given, 'other' (folded categories) grey and last."""
    import altair as alt

    ordered = [v for v in known if v in values] + [v for v in values if v not in known]
    ordered = [v for v in ordered if not v.startswith("other (")] + [v for v in ordered if v.startswith("other (")]
    colours = category_colors([v for v in ordered if not v.startswith("other (")], known)
    colours |= {v: OTHER_COLOR for v in ordered if v.startswith("other (")}
    return alt.Scale(domain=ordered, range=[colours[v] for v in ordered])


def system_scale(systems: set[str] | list[str]) -> alt.Scale:
    return color_scale(systems, SYSTEM_COLORS, SPARE_SYSTEM_COLORS)


def role_scale(roles: set[str] | list[str]) -> alt.Scale:
    return color_scale(roles, ROLE_COLORS, SPARE_ROLE_COLORS)


# The methods' colours: baselines grey, methods from a palette of their own, by name (stable).
BASELINE_COLOR = "#8c8c8c"
METHOD_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4")


def method_scale(methods: set[str]) -> alt.Scale:
    """Each method its own colour, chosen by its name (stable from build to build), baselines grey."""
    known = {m: BASELINE_COLOR for m in methods if m.startswith("baseline:")}
    return color_scale(methods, known, METHOD_COLORS)


def _check_palettes() -> None:
    """Colours are distinct: within each palette (a chart would otherwise show two values as one), and
    between systems and roles (a colour means one thing on the whole page)."""
    systems = [c.lower() for c in (*SYSTEM_COLORS.values(), *SPARE_SYSTEM_COLORS)]
    roles = [c.lower() for c in (*ROLE_COLORS.values(), *SPARE_ROLE_COLORS)]
    for name, palette in (("system colours", systems), ("role colours", roles), ("all", systems + roles)):
        if len(set(palette)) != len(palette):
            raise ValueError(f"{name}: a colour is used twice")


_check_palettes()
