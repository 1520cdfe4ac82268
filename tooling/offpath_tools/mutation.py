"""`make mutation`: mutmut 3 over offpath's domain and use cases, one file at a time, and a score per file.

    python -m offpath_tools.mutation [domain/job domain/cron logic/submit ...]   # default: every file of both
    python -m offpath_tools.mutation --resume [...]      # only the mutants not run yet or that survived last time
    python -m offpath_tools.mutation --report-only                               # the table of the last run
    python -m offpath_tools.mutation mutmut show offpath.domain.job.x_claim__mutmut_3

mutmut names a mutant after the dotted path of its file (`functions/offpath/domain/job.py` ->
`functions.offpath.domain.job`) and matches it against the `__module__` its tests import (`offpath.domain.job`);
it knows only the `src/` layout's prefix. offpath's package lives at `functions/offpath` (the package-dir mapping
of [tool.setuptools]), so before mutmut runs, its one naming function is given that mapping: `functions.` is
dropped as `src.` would be. Nothing else changes; configuration is [tool.mutmut] in pyproject.toml.

Score of a file: killed / (killed + survived - equivalent), where a timeout counts as killed, a mutant no test
reaches ("no tests") counts as survived, and `equivalent` are the survivors listed, each with its reason, in
tests/mutation_equivalents.toml (a listed mutant that is killed is reported: the listing is stale).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path.cwd()
EQUIVALENTS = Path("tests/mutation_equivalents.toml")
PACKAGE_DIRS = ("domain", "logic")
KILLED = {1, 3, 36, 24, -24, 152, 255}
SURVIVED = {0, 5, 33}


def package_dirs(pyproject: Path = Path("pyproject.toml")) -> dict[str, str]:
    """[tool.setuptools] package-dir, as dotted prefixes: {"functions.offpath": "offpath", ...}."""
    data = tomllib.loads(pyproject.read_text())
    mapping = data["tool"]["setuptools"]["package-dir"]
    return {path.replace("/", "."): package for package, path in mapping.items()}


def patch_mutmut() -> None:
    """Give mutmut's naming of mutants the package-dir mapping (see the module's docstring)."""
    import mutmut.__main__ as main
    import mutmut.mutation.file_mutation as file_mutation
    import mutmut.utils.format_utils as format_utils

    original = format_utils.get_mutant_name
    prefixes = package_dirs()

    def get_mutant_name(relative_source_path: Path, mutant_method_name: str) -> str:
        name = original(relative_source_path, mutant_method_name)
        for prefix, package in prefixes.items():
            if name.startswith(prefix + "."):
                return package + name[len(prefix) :]
        return name

    for module in (format_utils, main, file_mutation):
        module.get_mutant_name = get_mutant_name  # type: ignore[attr-defined]


def mutmut_cli(args: list[str]) -> None:
    patch_mutmut()
    from mutmut.__main__ import cli

    cli.main(args=args, prog_name="mutmut")


@dataclass
class Score:
    path: str
    killed: int = 0
    survived: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    other: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.killed + len(self.survived) + len(self.equivalent)

    @property
    def score(self) -> float:
        counted = self.killed + len(self.survived)
        return 100.0 * self.killed / counted if counted else 100.0

    @property
    def raw(self) -> float:
        counted = self.total
        return 100.0 * self.killed / counted if counted else 100.0


def equivalents() -> dict[str, str]:
    if not EQUIVALENTS.exists():
        return {}
    data = tomllib.loads(EQUIVALENTS.read_text())
    return {name: reason for name, reason in data.get("equivalent", {}).items()}


def score_of(source: Path, listed: dict[str, str]) -> Score | None:
    meta = Path("mutants") / (str(source) + ".meta")
    if not meta.exists():
        return None
    exit_codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    score = Score(str(source))
    for name, code in sorted(exit_codes.items()):
        if code in KILLED:
            score.killed += 1
            if name in listed:
                score.stale.append(name)
        elif code in SURVIVED:
            (score.equivalent if name in listed else score.survived).append(name)
        else:
            key = "not checked" if code is None else str(code)
            score.other[key] = score.other.get(key, 0) + 1
    return score


def sources(targets: list[str]) -> list[Path]:
    base = Path("functions/offpath")
    if not targets:
        return [p for d in PACKAGE_DIRS for p in sorted((base / d).glob("*.py")) if p.name != "__init__.py"]
    return [base / (t.removesuffix(".py") + ".py") for t in targets]


def unfinished(source: Path) -> list[str]:
    """`--resume`: the file's mutants not yet run, or that survived the last run and are not listed as equivalent
    (all of them before a first run)."""
    meta = Path("mutants") / (str(source) + ".meta")
    if not meta.exists():
        return [module_of(source) + ".*"]
    exit_codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    listed = equivalents()
    return sorted(
        name for name, code in exit_codes.items() if code is None or (code in SURVIVED and name not in listed)
    )


def module_of(source: Path) -> str:
    return "offpath." + ".".join(source.with_suffix("").parts[2:])


def report(paths: list[Path], seconds: dict[str, float]) -> int:
    listed = equivalents()
    print(f"\n{'file':<36} {'killed':>6} {'survived':>8} {'equiv.':>6} {'score':>7} {'raw':>7} {'time':>7}")
    below = 0
    for path in paths:
        score = score_of(path, listed)
        if score is None:
            print(f"{path!s:<36} (not run)")
            continue
        took = f"{seconds[str(path)]:.0f}s" if str(path) in seconds else ""
        target = 90.0 if "/domain/" in str(path) else 80.0
        mark = "" if score.score >= target else f"  < {target:.0f}%"
        below += bool(mark)
        print(
            f"{path!s:<36} {score.killed:>6} {len(score.survived):>8} {len(score.equivalent):>6} "
            f"{score.score:>6.1f}% {score.raw:>6.1f}% {took:>7}{mark}"
        )
        for name in score.survived:
            print(f"    survived: {name}")
        for name in score.stale:
            print(f"    listed as equivalent but killed (update {EQUIVALENTS}): {name}")
        if score.other:
            print(f"    other: {score.other}")
    return below


def run_env() -> dict[str, str]:
    """The mutmut run's environment: this tree's tooling first on the path. `offpath_tools` is imported before
    pytest adds the tests' paths (it runs mutmut), so without it the tests' fakes would be the installed tree's
    (an editable install of another checkout), not this one's."""
    path = os.pathsep.join(p for p in (str(ROOT / "tooling"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path}


def main(argv: list[str]) -> int:
    if argv[:1] == ["mutmut"]:
        mutmut_cli(argv[1:])
        return 0
    report_only = "--report-only" in argv
    targets = [a for a in argv if not a.startswith("--")]
    paths = sources(targets)
    seconds: dict[str, float] = {}
    if not report_only:
        for path in paths:
            names = unfinished(path) if "--resume" in argv else [module_of(path) + ".*"]
            if not names:
                continue
            started = time.monotonic()
            print(f"== {path}", flush=True)
            command = [sys.executable, "-m", "offpath_tools.mutation", "mutmut", "run", "--max-children", "1"]
            subprocess.run([*command, *names], check=False, env=run_env())
            seconds[str(path)] = time.monotonic() - started
    below = report(paths, seconds)
    if seconds:
        print(f"\ntotal: {sum(seconds.values()):.0f} s")
    return 1 if below and "--strict" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
