"""One default shapes world: the demo, `build shapes` + eval and a root-less `cycles/shapes_all` give the README's numbers.

Three routes to cycles-tiny's zero-shot CycleAcc on "the shapes world", in one cache:

1. the demo (:func:`run_demo` with the demo's seeds; its probes and splits cut short, they do not
   touch the zero-shot numbers), whose printed table names its world first;
2. ``clip-cycles build shapes --out WORLD`` with no flags, then ``clip_benchmark eval`` of the
   README's families on ``--dataset_root WORLD``;
3. ``clip_benchmark eval --dataset cycles/shapes_all --model cycles-tiny --pretrained shapes`` with
   no root, which generates (or reuses) :data:`DEFAULT_WORLD` in the cache.

Each route's figures must equal the others' and the table README.md quotes (parsed here from the
README's own text). Then the README's page command, run right after the demo in the same folder and
cache, must exit 0: its example recomputation finds the demo's world.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clip_cycles.data.sources.shapes_world import DEFAULT_WORLD, ShapesWorldOptions, cached_world, world_of
from clip_cycles.evaluation.demo import DEMO_SEEDS, DEMO_WORLD, QUOTED_FAMILIES, DemoSettings, run_demo, summary_table
from clip_cycles.results import read_result

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"

#: The demo with its seeds and world, its experiments other than zero-shot as short as they go.
CHEAP_DEMO = DemoSettings(
    seeds=DEMO_SEEDS, probe_epochs=1, ranks=(1,), transfer_epochs=1, oe_epochs=1, images_per_concept=1, attribute_seeds=(0,)
)
#: clip_benchmark's output template (each task's record at a predictable path).
TEMPLATE = "{dataset}_{pretrained}_{language}_{task}.json"


def readme_table(text: str) -> dict[str, tuple[str, str, int]]:
    """The README's quoted zero-shot table: family -> (CycleAcc mean, sd, cycles), as printed."""
    rows = re.findall(r"^\| (\w+) \| (\d\.\d{3}) ± (\d\.\d{3}) \| \[[^]]*\] \| (\d+) \|$", text, flags=re.M)
    return {f"shapes_{name}": (mean, sd, int(n)) for name, mean, sd, n in rows}


def figures(families: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str, int]]:
    """The quoted families' (mean, sd, cycles) of a route, formatted as the README prints them."""
    return {
        name: (f"{m['cycle_acc']:.3f}", f"{m['cycle_acc_sd']:.3f}", int(m["n_cycles"]))
        for name, m in families.items()
        if name in QUOTED_FAMILIES
    }


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIP_CYCLES_")}
    env.update({"CLIP_CYCLES_CACHE": str(cache), "TQDM_DISABLE": "1", "PYTHONPATH": str(REPO)})
    return env


def _run(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=_env(cache), cwd=cwd, capture_output=True, text=True, timeout=600)


def _ok(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    done = _run(args, cwd, cache)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _clip_benchmark(datasets: list[str], cwd: Path, cache: Path, *extra: str) -> dict[str, dict[str, Any]]:
    """``clip_benchmark eval`` through the plugin's entry point; the metrics of each family it scored."""
    args = [sys.executable, "-m", "clip_cycles.commands.clip_benchmark", "eval", "--dataset", *datasets]
    args += ["--model", "cycles-tiny", "--pretrained", "shapes", "--output", str(cwd / TEMPLATE), *extra]
    done = _ok(args, cwd, cache)
    out = {}
    for path in sorted(cwd.glob("cycles_shapes_*_shapes_en_cycles.json")):
        record = read_result(path)
        out[record["dataset"].removeprefix("cycles/")] = record["metrics"]
    assert out, done.stdout[-3000:]
    return out


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("default_world")
    cache = work / "cache"
    # 1. the demo, then the README's page command in the same folder and cache.
    demo = run_demo(work / "results", cache, CHEAP_DEMO)
    page_line = next(
        line.split("#")[0].strip()
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.startswith("clip-cycles page results/ ") and "--examples" in line
    )
    page_args = shlex.split(page_line)
    page = _run([sys.executable, "-m", "clip_cycles", *page_args[1:]], work, cache)
    # 2. `build shapes` with no flags, then the README's families on that folder.
    built = work / "built"
    built.mkdir()
    build = _ok([sys.executable, "-m", "clip_cycles", "build", "shapes", "--out", "world"], built, cache)
    folder = built / "world"
    quoted = [f"cycles/{name}" for name in QUOTED_FAMILIES]
    from_build = _clip_benchmark(quoted, built, cache, "--dataset_root", str(folder))
    # 3. cycles/shapes_all with no root.
    rootless = work / "rootless"
    rootless.mkdir()
    from_default = _clip_benchmark(["cycles/shapes_all"], rootless, cache)
    return {
        "work": work,
        "cache": cache,
        "demo": demo,
        "page": page,
        "page_args": page_args,
        "build": build,
        "folder": folder,
        "from_build": from_build,
        "from_default": from_default,
    }


def test_one_declared_world_is_the_demos_and_names_itself() -> None:
    assert DEMO_WORLD is DEFAULT_WORLD
    assert DEFAULT_WORLD == ShapesWorldOptions.make(n_images=1000, seed=0, image_size=64, val_fraction=0.25)
    assert DEFAULT_WORLD.describe() == "shapes world: 1000 images, 64 px, seed 0, val 0.25"
    assert DEFAULT_WORLD.folder_name() == "shapes_world-n1000-s0-p64-v0.25"
    other = DEFAULT_WORLD.replace(image_size=96, val_fraction=0.2)
    assert other.folder_name() == "shapes_world-n1000-s0-p96-v0.2" and "96 px" in other.describe()


def test_cached_world_is_generated_once_and_regenerated_when_its_stamp_differs(tmp_path: Path) -> None:
    small = DEFAULT_WORLD.replace(n_images=8)
    root = cached_world(tmp_path, small)
    assert root == tmp_path / "shapes_world-n8-s0-p64-v0.25" and world_of(root) == small
    stamp = (root / "shapes_world.json").stat().st_mtime_ns
    assert cached_world(tmp_path, small) == root and (root / "shapes_world.json").stat().st_mtime_ns == stamp
    (root / "shapes_world.json").write_text('{"kind": "shapes", "n_images": 8, "seed": 1, "image_size": 64}')
    assert world_of(root) != small
    assert cached_world(tmp_path, small) == root and world_of(root) == small


def test_the_three_routes_give_the_readmes_numbers(routes: dict[str, Any]) -> None:
    quoted = readme_table(README.read_text(encoding="utf-8"))
    assert sorted(quoted) == sorted(QUOTED_FAMILIES), quoted
    demo_families = routes["demo"]["zero_shot"]["families"]
    assert figures(demo_families) == quoted
    assert figures(routes["from_build"]) == quoted
    assert figures(routes["from_default"]) == quoted
    # The root-less collection and the demo agree on every family, to the last digit.
    assert sorted(routes["from_default"]) == sorted(demo_families)
    for name, metrics in demo_families.items():
        theirs = routes["from_default"][name]
        assert (theirs["cycle_acc"], theirs["n_cycles"]) == (metrics["cycle_acc"], metrics["n_cycles"]), name


def test_every_route_names_the_default_world(routes: dict[str, Any]) -> None:
    described = DEFAULT_WORLD.describe()
    assert summary_table(routes["demo"]).splitlines()[0] == f"world: {described}"
    assert routes["demo"]["zero_shot"]["world"] == described
    assert routes["build"].stdout == f"{described} (the default world) written to world\n"
    assert world_of(routes["folder"]) == DEFAULT_WORLD
    # The folder `build shapes` wrote is the cached default world, byte for byte.
    cached = cached_world(routes["cache"] / "datasets")
    files = sorted(p.relative_to(cached) for p in cached.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(routes["folder"]) for p in routes["folder"].rglob("*") if p.is_file())
    assert all((cached / f).read_bytes() == (routes["folder"] / f).read_bytes() for f in files)


def test_the_readmes_page_command_after_the_demo_exits_0(routes: dict[str, Any]) -> None:
    done = routes["page"]
    assert routes["page_args"][:4] == ["clip-cycles", "page", "results/", "--out"], routes["page_args"]
    assert done.returncode == 0, f"{routes['page_args']} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "page: site/index.html" in done.stdout
    # The examples are read from the samples file the demo's record names (nothing recomputed, no model flags).
    family = (routes["work"] / "site" / "families" / "shapes_coarse_object.html").read_text(encoding="utf-8")
    assert re.findall(r'<article class="cycle" data-kind="(\w+)"', family) == ["hardest"] * 5 + ["easiest"] * 5 + ["random"] * 5
