"""Every registry of the package is a clip_cycles.registry.Registry: one wording of its two errors.

For each registry: registering a taken name through the module's own function is refused with
the Registry's sentence and leaves the first registration in place; an unknown name, looked up
through the module's own function, names the registered ones and suggests the close one. A last
pair of tests reads the package's source for registries and resolvers written by hand.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import pytest

from clip_cycles.attributes import attribute_probes, concepts, splitters
from clip_cycles.attributes.attribute_experiments import strategy_names
from clip_cycles.benchmark_audit import adapters
from clip_cycles.data.families import registry as families
from clip_cycles.data.sources import registry as sources
from clip_cycles.encoding import backends
from clip_cycles.evaluation import runners
from clip_cycles.experiments import report, synthetic
from clip_cycles.heads import losses, score_heads
from clip_cycles.registry import Registry

PACKAGE = Path(__file__).resolve().parents[2] / "clip_cycles"


def _nothing(*args: Any, **kwargs: Any) -> None:  # a stand-in that must never be registered
    raise AssertionError("a refused registration was used")


@dataclass(frozen=True)
class Case:
    """One registry: its kind in words, a taken name, a typo of it, how to register and look up."""

    registry: Callable[[], Registry[Any]]
    kind: str
    taken: str
    typo: str
    register: Callable[[str], Any]
    lookup: Callable[[str], Any]


def _coco_families() -> Registry[Any]:
    families.list_families("coco")  # imports the module registering them
    return families.FAMILIES["coco"]


CASES = {
    "score heads": Case(
        lambda: score_heads.HEADS, "score head", "bilinear", "bilinaer",
        lambda n: score_heads.register_head(n)(type("Again", (score_heads.ScoreHead,), {})),
        lambda n: score_heads.make_head(n, 2, 2),
    ),
    "losses": Case(
        lambda: losses.LOSSES, "loss", "cycle", "cycel", lambda n: losses.register_loss(n, "cycle")(_nothing), losses.get_loss
    ),
    "report sections": Case(
        lambda: report.SECTIONS, "report section", "probe", "prob",
        lambda n: report.register_section(n, "again.json", "again")(_nothing), lambda n: report.SECTIONS.get(n),
    ),
    "synthetic controls": Case(
        lambda: synthetic.CONTROLS, "synthetic control", synthetic.CONTROLS.names()[0], synthetic.CONTROLS.names()[0] + "x",
        lambda n: synthetic.register_control(replace(synthetic.CONTROLS.get(n), probes=_nothing)),
        lambda n: synthetic.run_controls(synthetic.SyntheticConfig(), (0,), (n,)),
    ),
    "benchmark formats": Case(
        lambda: adapters.ADAPTERS, "benchmark format", "sugarcrepe", "sugarcrep",
        lambda n: adapters.register_adapter(n, "again", "x")(_nothing), adapters.get_adapter,
    ),
    "split strategies": Case(
        lambda: splitters.STRATEGIES, "split strategy", "clustering", "clusterin",
        lambda n: splitters.register_strategy(n, "again")(_nothing),
        lambda n: splitters.make_splitter(n, splitters.SplitContext(("a", "b"))),
    ),
    "probe solvers": Case(
        lambda: attribute_probes.PROBE_SOLVERS, "probe solver", "sklearn", "sklaern",
        lambda n: attribute_probes.PROBE_SOLVERS.register(n, _nothing), lambda n: attribute_probes.PROBE_SOLVERS.get(n),
    ),
    "pairs formats": Case(
        lambda: concepts.PAIR_READERS, "pairs format", ".json", ".jsn",
        lambda n: concepts.PAIR_READERS.register(n, _nothing), lambda n: concepts.PAIR_READERS.get(n),
    ),
    "sources": Case(
        lambda: sources.SOURCES, "source", "shapes", "shape",
        lambda n: sources.register_source(sources.get_source(n)), sources.get_source,
    ),
    "coco families": Case(
        _coco_families, "coco family", "strict_size", "strict_sise",
        lambda n: families.register_family("coco", n, "again")(type("Again", (families.Family,), {})),
        lambda n: families.get_family("coco", n),
    ),
    "index loaders": Case(
        lambda: (_coco_families(), families.INDEX_LOADERS)[1], "index loader", "coco", "cocoa",
        lambda n: families.register_index_loader(n)(_nothing), lambda n: families.INDEX_LOADERS.get(n),
    ),
    "runners": Case(
        lambda: runners.RUNNERS, "output type", "cycle_probe", "cycle_prob",
        lambda n: runners.register_runner(n, "again")(_nothing), runners.runner_for,
    ),
    "backends": Case(
        lambda: backends.BACKENDS, "model backend", "open_clip", "open_clp",
        lambda n: backends.register_backend(n, _nothing), backends.get_backend,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_a_taken_name_is_refused_in_the_registry_wording_and_the_first_stands(case: Case) -> None:
    registry = case.registry()
    assert isinstance(registry, Registry) and registry.kind == case.kind
    first = registry.entry(case.taken)
    with pytest.raises(ValueError) as error:
        case.register(case.taken)
    assert re.fullmatch(
        rf"{re.escape(case.kind)} '{re.escape(case.taken)}' is already registered \(by [^)]+\); "
        r"choose another name or pass replace=True",
        str(error.value),
    ), str(error.value)
    assert registry.entry(case.taken) == first


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_an_unknown_name_lists_the_registered_and_suggests_the_close_one(case: Case) -> None:
    with pytest.raises(ValueError) as error:
        case.lookup(case.typo)
    message = str(error.value)
    head = f"unknown {case.kind} '{case.typo}'; registered: "
    assert message.startswith(head), message
    listed = message[len(head) :].split(" (did you mean ")[0].split("; ")[0].split(", ")
    assert case.taken in listed and case.typo not in listed
    assert f"(did you mean '{case.taken}'" in message


def test_the_family_builders_and_the_published_splits_keep_their_context() -> None:
    with pytest.raises(ValueError, match=r"^unknown family builder 'shape'; registered: coco, gqa$"):
        sources.get_builder("shape")
    context = splitters.SplitContext(("a", "b"), published={"paper": object()})  # type: ignore[dict-item]
    order = "random, llm, similarity, clustering, supercategory"  # registration order, as the demo lists them
    with pytest.raises(
        ValueError, match=r"'nope'; registered: random, llm, similarity, clustering, supercategory; published splits: paper$"
    ):
        splitters.make_splitter("nope", context)
    with pytest.raises(ValueError) as error:
        strategy_names(["randm", "llm", "zzz"], context)
    assert str(error.value) == (
        f"unknown split strategy 'randm'; registered: {order} (did you mean 'random'?) (also unknown: 'zzz'); "
        "or name a published split with --published-split NAME=FILE"
    )
    assert strategy_names(["llm"], context) == ["llm", "paper"]


# --------------------------------------------------------------------------- no registry or resolver by hand

#: Files exempt from the scan (none: cli.COMMANDS is a Registry in clip_cycles/commands/main.py).
PENDING: set[str] = set()

DUPLICATE_WORDING = re.compile(r"is already registered|already has an? \w+|registered \w+: \{")


def hand_written_registries(path: Path, source: str) -> list[str]:
    """Where a module keeps a registry of its own: the duplicate wording, or an empty module-level dict
    filled by a ``register_*`` function, or a ``"module:function"`` string split and imported by hand."""
    found = [
        f"{path.name}:{n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1) if DUPLICATE_WORDING.search(line)
    ]
    tree = ast.parse(source)
    empty_dicts = set()
    for node in tree.body:
        target, value = (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict) and not value.keys:
            empty_dicts.add(target.id)
    for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        names = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
        calls = [n for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
        if function.name.startswith("register") and names & empty_dicts:
            found.append(f"{path.name}: {function.name} fills {sorted(names & empty_dicts)}")
        splits = any(c.func.attr == "partition" and [getattr(a, "value", None) for a in c.args] == [":"] for c in calls)
        if splits and any(c.func.attr == "import_module" for c in calls):
            found.append(f"{path.name}: {function.name} resolves 'module:function' by hand (use registry.resolve_target)")
    return found


def test_the_checker_finds_each_kind_of_hand_written_registry() -> None:
    planted = """
WIDGETS: dict[str, object] = {}
GADGETS = {}

def register_widget(name, widget):
    if name in WIDGETS:
        raise ValueError(f"widget {name!r} is already registered")
    WIDGETS[name] = widget

def register_gadget(name, gadget):
    GADGETS[name] = gadget

def load(target):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
"""
    found = hand_written_registries(Path("planted.py"), planted)
    assert len(found) == 4, found
    assert "is already registered" in found[0]
    assert "register_widget fills ['WIDGETS']" in found[1] and "register_gadget fills ['GADGETS']" in found[2]
    assert "load resolves 'module:function' by hand" in found[3]
    assert (
        hand_written_registries(Path("fine.py"), "REG = Registry('widget')\n\ndef register(n, w):\n    REG.register(n, w)\n")
        == []
    )


def test_the_package_keeps_no_registry_outside_registry_py() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "registry.py" or relative in PENDING:
            continue
        found += hand_written_registries(path, path.read_text(encoding="utf-8"))
    assert found == []
