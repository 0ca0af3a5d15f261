"""``show``'s cache (derive/explain/cache.py): a hit prints what a fresh derivation prints, and
imports no SymPy; anything a rendering is made from, changed, is a miss; an op file whose result
could depend on more than its bytes is never cached; a broken cache is no error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import derive.explain.cache as cache_module
from derive.__main__ import main
from derive.explain.cache import ShowCache, self_contained
from tests.op_table import SIGMOID

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import sys; from derive.__main__ import main; rc = main(sys.argv[1:]); "
    "print('sympy imported' if 'sympy' in sys.modules else 'no sympy', file=sys.stderr); "
    "sys.exit(rc)"
)


def _show(folder: Path | None, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BACKGEN_CACHE_DIR="" if folder is None else str(folder))
    return subprocess.run(
        [sys.executable, "-c", PROBE, "show", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _entries(folder: Path) -> list[Path]:
    return sorted((folder / "show").glob("*.txt")) if (folder / "show").exists() else []


@pytest.mark.parametrize("mode", [[], ["--latex"], ["--json"]])
def test_a_hit_prints_what_a_derivation_prints_without_sympy(tmp_path: Path, mode) -> None:
    fresh = _show(None, "tanh", "relu", *mode)
    first = _show(tmp_path, "tanh", "relu", *mode)
    again = _show(tmp_path, "tanh", "relu", *mode)
    assert fresh.returncode == first.returncode == again.returncode == 0
    assert fresh.stdout == first.stdout == again.stdout
    assert "sympy imported" in first.stderr and "no sympy" in again.stderr
    assert len(_entries(tmp_path)) == 2  # one per op


def test_the_cache_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKGEN_CACHE_DIR", "")
    assert ShowCache.default() is None
    monkeypatch.setenv("BACKGEN_CACHE_DIR", str(tmp_path))
    assert main(["show", "tanh", "--no-cache", "--width", "80"]) == 0
    assert _entries(tmp_path) == []


def test_an_edited_op_file_is_a_miss(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cache = ShowCache(tmp_path / "show")
    path = tmp_path / "my_sigmoid.py"
    path.write_text(SIGMOID)
    assert list(_run(path, cache)) and len(_entries(tmp_path)) == 1
    path.write_text(SIGMOID.replace("Element-wise logistic sigmoid.", "edited"))
    (out,) = _run(path, cache)
    assert "sigmoid: edited" in out and len(_entries(tmp_path)) == 2


def _run(path: Path, cache: ShowCache, mode: str = "text", width: int = 100) -> list:
    from derive.explain.command import show_many

    out = list(show_many([str(path)], mode, width, cache))
    assert all(isinstance(o, str) for o in out), out
    return out


def test_mode_width_and_path_are_part_of_the_key(tmp_path: Path) -> None:
    cache, op = ShowCache(tmp_path), ROOT / "ops" / "tanh.py"
    keys = {
        cache.key(op, "text", 100),
        cache.key(op, "text", 60),
        cache.key(op, "latex", 100),
        cache.key(Path(os.path.relpath(op)), "text", 100),  # the header prints the path
    }
    assert None not in keys and len(keys) == 4
    assert cache.key(op, "latex", 100) == cache.key(op, "latex", 60)  # width is text's only


def test_an_engine_change_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = tmp_path / "derive"
    engine.mkdir()
    (engine / "rule.py").write_text("A = 1\n")
    monkeypatch.setattr(cache_module, "ROOT", tmp_path)
    monkeypatch.setattr(cache_module, "ENGINE", (engine,))
    before = cache_module.engine_fingerprint()
    (engine / "rule.py").write_text("A = 2\n")
    assert cache_module.engine_fingerprint() != before
    (engine / "rule.py").write_text("A = 1\n")
    assert cache_module.engine_fingerprint() == before
    (engine / "new.py").write_text("")
    assert cache_module.engine_fingerprint() != before


@pytest.mark.parametrize(
    "source, cacheable",
    [
        ('from derive import Op\nOP = Op(name="a", inputs=["x[N]"], definitions=[])', True),
        ("from derive.language import Op\nimport math\nEPS = math.sqrt(2)", True),
        ("from derive import Op\nfrom helpers import DEFS", False),  # another file's text
        ("from .helpers import DEFS", False),
        ("import derive\nOP = derive.emit.generate.load_op('other.py')", False),
        ("import json\nDEFS = json.load(open('defs.json'))", False),
        ("from pathlib import Path", False),
        ("DEFS = open('defs.txt').read().split()", False),
        ("exec('OP = 1')", False),
        ("HERE = __file__", False),
        ("import os\nN = os.environ['N']", False),
        ("def broken(:", False),
    ],
)
def test_only_a_self_contained_op_file_is_cached(source: str, cacheable: bool) -> None:
    assert self_contained(source) is cacheable


def test_an_op_file_that_imports_a_helper_is_derived_each_time(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text('DOC = "first"\n')
    path = tmp_path / "my_op.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nfrom helpers import DOC\n"
        + SIGMOID.replace('"Element-wise logistic sigmoid."', "DOC")
    )
    cache = ShowCache(tmp_path / "cache")
    assert cache.key(path, "text", 100) is None
    assert "sigmoid: first" in _run(path, cache)[0]
    assert not (tmp_path / "cache").exists()


def test_a_damaged_entry_is_derived_again(tmp_path: Path) -> None:
    cache, op = ShowCache(tmp_path / "show"), ROOT / "ops" / "tanh.py"
    (good,) = _run(op, cache)
    (entry,) = _entries(tmp_path)
    entry.write_text(entry.read_text().replace("tanh", "tang"))
    assert cache.get(entry.stem) is None
    assert _run(op, cache) == [good] and cache.get(entry.stem) == good  # and put back whole


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("the user's, not ours\n")
    for folder in (blocker, blocker / "below"):  # a file where the folder would be
        result = _show(folder, "relu", "--width", "80")
        assert result.returncode == 0 and result.stdout.startswith("relu: "), result.stderr
        assert "Traceback" not in result.stderr
    assert blocker.read_text() == "the user's, not ours\n"


def test_pruning_drops_the_oldest_entries_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "MAX_ENTRIES", 4)
    monkeypatch.setattr(cache_module, "KEEP_ENTRIES", 2)
    cache = ShowCache(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    stale = tmp_path / ".tmp-left_by_a_kill.txt"
    stale.write_text("partial")
    os.utime(stale, (0, 0))
    keys = [f"{i:064x}" for i in range(5)]
    for i, key in enumerate(keys):
        cache.put(key, f"entry {i}")
        os.utime(tmp_path / f"{key}.txt", (1000 + i, 1000 + i))
    cache.put(keys[-1], "entry 4")  # the fifth write prunes: 5 > 4 entries, keep the newest 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["notes.txt", f"{keys[3]}.txt", f"{keys[4]}.txt"]
    )
    assert cache.get(keys[4]) == "entry 4" and cache.get(keys[0]) is None
