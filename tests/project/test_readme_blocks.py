"""Every ```python / ```bash / ```sh / ```console block of README.md runs as pasted, or says why not.

Blocks run in README order in one scratch folder (a later block may read what an earlier one
wrote, as a reader following the README would), with HOME, the clip_cycles cache and the
Hugging Face caches inside it and this environment's console scripts first on PATH. Python
blocks run with this interpreter, shell blocks with bash under ``set -e`` (a console block's
``$ `` lines are its commands). HTML comment lines right above a block steer it:

- ``<!-- readme-test: skip (needs ...) -->``: not run; the reason must say what it needs that
  CI lacks (data on disk, weights from the network, a GPU) and is shown as the skip reason;
- ``<!-- readme-test: setup NAME -->``: before the block, the test provides NAME from
  generated data when an earlier block has not (:data:`SETUPS`);
- ``<!-- readme-test: stand-in PATH=PATH ... (why) -->``: the block runs with each path
  replaced by a stand-in made from shipped or generated data (the why is required).

An unmarked block that fails, an unknown marker or a marker with no block under it fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
LANGUAGES = ("python", "bash", "sh", "console")
FENCE = re.compile(r"^```([\w-]*)\s*$")
MARKER = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip \((needs .+)\)$")
SETUP = re.compile(r"^setup ([\w-]+(?:[ ,]+[\w-]+)*)$")
STAND_IN = re.compile(r"^stand-in ((?:\S+=\S+ )+)\((.+)\)$")
BLOCK_TIMEOUT = 300


@dataclass
class Block:
    """One fenced code block of a Markdown file and the markers right above it."""

    line: int  # 1-based line of the opening fence
    language: str
    code: str
    skip: str | None = None
    setups: list[str] = field(default_factory=list)
    stand_ins: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"L{self.line}-{self.language}"


def parse_blocks(text: str, source: str = "README.md") -> list[Block]:
    """The runnable-language blocks of ``text`` with their markers; a malformed or stray marker is a ValueError."""
    blocks: list[Block] = []
    pending: list[tuple[int, str]] = []  # markers waiting for the block right below them
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line)
        if marker:
            pending.append((i + 1, marker.group(1)))
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:  # only top-level fences: an indented block belongs to a list item and is not a command
            end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
            if end is None:
                raise ValueError(f"{source}:{i + 1}: code block never closed")
            language = fence.group(1)
            if language in LANGUAGES:
                blocks.append(_with_markers(Block(i + 1, language, "\n".join(lines[i + 1 : end]) + "\n"), pending, source))
            elif pending:
                raise ValueError(f"{source}:{pending[0][0]}: readme-test marker above a {language or 'plain'} block")
            pending = []
            i = end + 1
            continue
        if pending:
            raise ValueError(f"{source}:{pending[0][0]}: readme-test marker not right above a code block")
        i += 1
    if pending:
        raise ValueError(f"{source}:{pending[0][0]}: readme-test marker not right above a code block")
    return blocks


def _with_markers(block: Block, markers: list[tuple[int, str]], source: str) -> Block:
    for line, body in markers:
        if skip := SKIP.match(body):
            block.skip = skip.group(1)
        elif setup := SETUP.match(body):
            for name in re.split(r"[ ,]+", setup.group(1)):
                if name not in SETUPS:
                    raise ValueError(f"{source}:{line}: unknown setup {name!r}; known: {', '.join(sorted(SETUPS))}")
                block.setups.append(name)
        elif stand_in := STAND_IN.match(body):
            block.stand_ins.update(pair.split("=", 1) for pair in stand_in.group(1).split())
        else:
            raise ValueError(
                f"{source}:{line}: readme-test marker {body!r} is not 'skip (needs ...)', 'setup NAME' or "
                "'stand-in PATH=PATH ... (why)'"
            )
    return block


def script_of(block: Block) -> str:
    """What runs for ``block``: its code with the stand-ins put in (a console block: its ``$`` lines)."""
    code = block.code
    if block.language == "console":
        code = "".join(line[2:] + "\n" for line in code.splitlines() if line.startswith("$ "))
    for path, stand_in in block.stand_ins.items():
        code = code.replace(path, stand_in)
    return code if block.language == "python" else "set -e\n" + code


def block_env(workspace: Path) -> dict[str, str]:
    """HOME and every cache inside ``workspace``; this environment's scripts and this checkout first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIP_CYCLES_")}
    home = workspace / ".home"
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        CLIP_CYCLES_CACHE=str(workspace / ".clip_cycles_cache"),
        HF_HOME=str(home / ".cache" / "huggingface"),
        HF_DATASETS_CACHE=str(home / ".cache" / "huggingface" / "datasets"),
        HF_HUB_OFFLINE="1",  # a block that would download must fail here, not fetch
        TQDM_DISABLE="1",
        MPLBACKEND="Agg",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    return env


def run_block(block: Block, workspace: Path) -> subprocess.CompletedProcess[str]:
    """Run ``block`` in ``workspace`` (setups first); the finished process, whatever its exit status."""
    for name in block.setups:
        SETUPS[name](workspace)
    script = workspace / f".readme_{block.name}.{'py' if block.language == 'python' else 'sh'}"
    script.write_text(script_of(block), encoding="utf-8")
    command = [sys.executable if block.language == "python" else "bash", str(script)]
    return subprocess.run(command, cwd=workspace, env=block_env(workspace), capture_output=True, text=True, timeout=BLOCK_TIMEOUT)


def _cli(workspace: Path, *args: str) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "clip-cycles"), *args],
        cwd=workspace,
        env=block_env(workspace),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    assert done.returncode == 0, f"setup clip-cycles {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def _coco_cycles(workspace: Path) -> None:
    """A built COCO-family folder ``coco_cycles`` (the README builds it from the shapes world a block earlier)."""
    if (workspace / "coco_cycles" / "build_info.json").is_file():
        return
    if not (workspace / "shapes_world").is_dir():
        _cli(workspace, "build", "shapes", "--out", "shapes_world", "-q")
    _cli(workspace, "build", "coco", "--coco-root", "shapes_world", "--out", "coco_cycles", "-q")


#: What a ``setup NAME`` marker provides, made in the block's folder from generated data.
SETUPS: dict[str, Callable[[Path], None]] = {"coco_cycles": _coco_cycles}

BLOCKS = parse_blocks(README.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme_blocks")


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_readme_block_runs(block: Block, workspace: Path) -> None:
    if block.skip:
        pytest.skip(f"README.md:{block.line}: {block.skip}")
    done = run_block(block, workspace)
    assert done.returncode == 0, (
        f"README.md:{block.line} ({block.language} block) failed as pasted, exit status {done.returncode}; fix it or mark "
        f"it '<!-- readme-test: skip (needs ...) -->':\n{script_of(block)}\n--- stdout\n{done.stdout[-3000:]}\n"
        f"--- stderr\n{done.stderr[-3000:]}"
    )


def test_readme_has_blocks_run_and_skipped_with_reasons() -> None:
    # The summary this file reports: every runnable-language block is either run or skipped for a named need.
    run = [b.name for b in BLOCKS if not b.skip]
    skipped = {b.name: b.skip for b in BLOCKS if b.skip}
    assert run and all(reason.startswith("needs ") for reason in skipped.values())
    # Counted again without the parser: an opening fence is a line "```<language>" (closing fences are bare).
    openings = [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("```")]
    assert len(run) + len(skipped) == len(BLOCKS) == sum(line[3:].strip() in LANGUAGES for line in openings)


# --------------------------------------------------------------------------- the checks can fail


def test_an_unmarked_failing_block_fails_and_a_passing_one_passes(tmp_path: Path) -> None:
    text = "# t\n\n```bash\ntrue\nfalse\necho never\n```\n\n```python\nprint('ok')\n```\n\n```yaml\nnot: run\n```\n"
    failing, passing = parse_blocks(text, "t.md")
    assert (failing.line, failing.language, failing.skip) == (3, "bash", None)
    done = run_block(failing, tmp_path)
    assert done.returncode == 1 and "never" not in done.stdout  # set -e stops at the first failing command
    assert run_block(passing, tmp_path).stdout == "ok\n"


def test_markers_skip_set_up_and_stand_in(tmp_path: Path) -> None:
    text = (
        "<!-- readme-test: skip (needs COCO 2017 on disk) -->\n```bash\nexit 1\n```\n"
        "<!-- readme-test: stand-in /data/x=here (a folder made here) -->\n```console\n$ test -d /data/x\nsome output\n```\n"
    )
    skipped, stood_in = parse_blocks(text, "t.md")
    assert skipped.skip == "needs COCO 2017 on disk"
    assert stood_in.stand_ins == {"/data/x": "here"} and script_of(stood_in) == "set -e\ntest -d here\n"
    assert run_block(stood_in, tmp_path).returncode == 1  # no folder "here" yet: the stand-in reached the command
    (tmp_path / "here").mkdir()
    assert run_block(stood_in, tmp_path).returncode == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("<!-- readme-test: skip -->\n```bash\nx\n```\n", "is not 'skip (needs ...)'"),
        ("<!-- readme-test: skip (slow) -->\n```bash\nx\n```\n", "is not 'skip (needs ...)'"),
        ("<!-- readme-test: stand-in /a=b -->\n```bash\nx\n```\n", "is not 'skip (needs ...)'"),
        ("<!-- readme-test: setup nothing_like_it -->\n```bash\nx\n```\n", "unknown setup 'nothing_like_it'"),
        ("<!-- readme-test: skip (needs x) -->\n\ntext\n```bash\nx\n```\n", "not right above a code block"),
        ("<!-- readme-test: skip (needs x) -->\n```yaml\nx: 1\n```\n", "above a yaml block"),
        ("```bash\nx\n", "never closed"),
    ],
)
def test_malformed_markers_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_blocks(text, "t.md")
