#!/usr/bin/env python3
"""Checks a Debian package list (tools/packages.txt) against what the build
really uses, so that the list tools/run.sh installs on a fresh machine is
complete.

Every shared library the given binaries load (as ldd resolves it) and every
header the build included from outside the source and build folders (ninja's
dependency log) must belong to a package of the list, to one in the closure
of their Depends and Pre-Depends, or to the base system (Essential and
required packages, which every Debian root has). The closure is computed from
dpkg's installed package data: of alternatives "a | b" the first installed
one counts, as apt would pick it on a fresh machine. Files under
/usr/local/cuda (the CUDA toolkit, not a Debian package) are skipped.

With --scripts, also every program the given scripts run (the first word of
each command of a shell script, the program a Python script hands to
subprocess) that is installed in Debian's own folders (/usr/bin, /usr/sbin,
/bin, /sbin): its package must be in the closure too. Programs a shell
script tests for first (`command -v X`) are optional and not checked.

Prints each missing package with the file that needs it and exits 1; 0 when
nothing is missing; 2 on bad usage. --list may be given several times (the
test job installs two lists).

  tools/check_packages.py --list tools/packages.txt [--build-dir build] [--scripts SCRIPT...] [BINARY...]
"""
import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

SKIPPED_PREFIXES = ("/usr/local/cuda",)  # the CUDA toolkit: installed by hand, not by apt


def read_list(path):
    names = []
    for line in open(path):
        words = line.split("#", 1)[0].split()
        if words:
            names.append(words[0])
    return names


def installed_packages():
    """{name: (depends text, provides text, base system?)} of installed packages."""
    fields = "${Package}\t${db:Status-Abbrev}\t${Essential}\t${Priority}\t${Provides}\t${Depends}, ${Pre-Depends}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f", fields], check=True, capture_output=True, text=True).stdout
    packages = {}
    for line in out.splitlines():
        name, status, essential, priority, provides, depends = line.split("\t")
        if status.startswith("ii"):
            packages[name] = (depends, provides, essential == "yes" or priority == "required")
    return packages


def bare_name(relation):
    """'libfoo:any (>= 1.2)' -> 'libfoo'."""
    return re.split(r"[\s:(]", relation.strip(), maxsplit=1)[0]


def closure(roots, packages):
    """The listed packages, the base system, and everything they depend on, as installed here."""
    providers = defaultdict(list)
    for name, (_, provides, _) in packages.items():
        providers[name].append(name)
        for virtual in provides.split(","):
            if virtual.strip():
                providers[bare_name(virtual)].append(name)
    todo = list(roots) + [name for name, (_, _, base) in packages.items() if base]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in packages:
            continue
        seen.add(name)
        for group in packages[name][0].split(","):
            for alternative in group.split("|"):
                found = providers.get(bare_name(alternative)) if alternative.strip() else None
                if found:
                    todo.extend(found)
                    break
    return seen


def owners(paths):
    """{path: set of packages} for the paths dpkg knows (one dpkg -S call per 500 paths)."""
    result = defaultdict(set)
    paths = sorted(set(paths))
    for i in range(0, len(paths), 500):
        chunk = paths[i:i + 500]
        wanted = set(chunk)
        out = subprocess.run(["dpkg", "-S", *chunk], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("diversion "):
                continue
            names, _, path = line.partition(": ")
            if path in wanted:  # a pattern also matches longer paths; only exact ones count
                result[path].update(bare_name(n) for n in names.split(","))
    return result


def alternatives(path):
    """Every file that may stand behind a path through /etc/alternatives (the
    machine's choice is not the list's: a fresh machine picks among the
    alternatives its installed packages offer)."""
    for _ in range(40):
        if not os.path.islink(path):
            return []
        path = os.path.join(os.path.dirname(path), os.readlink(path))
        if os.path.dirname(path) == "/etc/alternatives":
            out = subprocess.run(["update-alternatives", "--list", os.path.basename(path)], capture_output=True,
                                 text=True).stdout
            return out.split()
    return []


def candidates(path):
    """The names dpkg may know a file by: as given, resolved, any alternative, either side of the /usr merge."""
    names = []
    for p in [os.path.normpath(path), os.path.realpath(path)] + alternatives(path):
        names.append(p)
        for merged in ("/lib", "/lib64", "/bin", "/sbin"):
            if p.startswith(merged + "/"):
                names.append("/usr" + p)
            elif p.startswith("/usr" + merged + "/"):
                names.append(p[len("/usr"):])
    return list(dict.fromkeys(names))


class UsageError(Exception):
    pass


SHELL_WORDS = set("""
if then else elif fi for while until do done case esac in function select time { } [[ ]] [ ] ( ) ;; !
alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown echo enable
eval exec exit export false fc fg getopts hash help history jobs kill let local logout mapfile popd printf pushd
pwd read readarray readonly return set shift shopt source suspend test times trap true type typeset ulimit umask
unalias unset wait . :
""".split())
COMMAND_PREFIXES = {"exec", "time", "nohup", "env", "command", "builtin", "!", "then", "do", "else", "elif", "if",
                    "while", "until"}
COMMAND_SEPARATORS = re.compile(r"\|\||&&|;;|[;|&(){}`]|\$\(")
DEBIAN_PROGRAM_DIRS = ("/usr/bin", "/usr/sbin", "/bin", "/sbin")


def shell_programs(text):
    """{program: line} of the first word of each command of a shell script, but builtins, keywords, the
    script's own functions, programs it looks for first (optional ones) and words computed at run time."""
    functions = set(re.findall(r"^\s*(?:function\s+)?([\w.-]+)\s*\(\)", text, re.M))
    optional = set(re.findall(r"(?:command\s+-v|type\s+-p|hash|which)\s+([\w.+-]+)", text))
    found, heredoc = {}, None
    for number, line in enumerate(text.replace("\\\n", " ").split("\n"), 1):
        if heredoc:  # a here-document's body: data, not commands (its $(...) aside)
            if line.strip() == heredoc:
                heredoc = None
            continue
        m = re.search(r"(?<!<)<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?", line)
        if m:
            heredoc = m.group(1)
        if re.match(r"^\s*(local|declare|typeset|readonly|export)\s", line):
            continue  # declarations: their words are names and values
        line = re.sub(r"'[^']*'", "''", line)
        line = re.sub(r'"[^"$`]*"', '""', line)
        line = re.sub(r"(^|\s)#.*", "", line)
        for segment in COMMAND_SEPARATORS.split(line):
            words = segment.split()
            while words and (re.match(r"^\w+=", words[0]) or words[0] in COMMAND_PREFIXES):
                words.pop(0)
            if words and words[0] == "timeout":
                words = [w for w in words[1:] if not re.match(r"^(-\S+|[\d.]+[smhd]?)$", w)]
            if not words:
                continue
            word = words[0]
            if word in SHELL_WORDS or word in functions or word in optional or not re.match(r"^[\w.+-]+$", word):
                continue
            found.setdefault(word, number)
    return found


def python_programs(text):
    """{program: line} of the programs a Python script runs through subprocess."""
    found = {}
    for m in re.finditer(r"subprocess\.\w+\(\s*\[\s*[\"']([\w.+-]+)[\"']", text):
        found.setdefault(m.group(1), text[:m.start()].count("\n") + 1)
    return found


def script_programs(scripts):
    """{program path: "script:line" that runs it}, for programs found in Debian's own folders."""
    needed = {}
    for script in scripts:
        text = open(script).read()
        is_python = script.endswith(".py") or text.startswith("#!") and "python" in text.split("\n", 1)[0]
        for word, line in (python_programs(text) if is_python else shell_programs(text)).items():
            for folder in DEBIAN_PROGRAM_DIRS:
                path = os.path.join(folder, word)
                if os.path.isfile(path) and os.access(path, os.X_OK):
                    needed.setdefault(path, f"{script}:{line}")
                    break
    return needed


def linked_libraries(binaries):
    """{library path: first binary that loads it}, and [(name, binary)] of those ldd finds no file for."""
    needed, unresolved = {}, []
    for binary in binaries:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True)
        if out.returncode != 0:
            raise UsageError(f"ldd {binary} failed: {out.stderr.strip()}")
        for line in out.stdout.splitlines():
            line = line.strip()
            if "=> not found" in line:
                unresolved.append((line.split()[0], binary))
                continue
            m = re.match(r"(?:\S+ => )?(/\S+) \(0x", line)
            if m:
                needed.setdefault(m.group(1), binary)
    return needed, unresolved


def included_headers(build_dir, source_dir):
    """{header path: first object that includes it} from ninja's dependency log, outside the project."""
    out = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True, check=True).stdout
    headers, target = {}, None
    inside = tuple(os.path.realpath(d) + "/" for d in (source_dir, build_dir))
    for line in out.splitlines():
        if line and not line[0].isspace():
            target = line.split(":", 1)[0]
            continue
        path = line.strip()
        if not path.startswith("/"):
            continue  # relative: inside the build or source folder
        path = os.path.normpath(path)
        if not os.path.realpath(path).startswith(inside):
            headers.setdefault(path, target)
    return headers


def check(files, allowed):
    """Returns (missing {package: [(file, needed by)]}, unowned [(file, needed by)], skipped files)."""
    missing, unowned, skipped = defaultdict(list), [], []
    names = {f: candidates(f) for f in files}
    known = owners([n for ns in names.values() for n in ns])
    for f, needed_by in sorted(files.items()):
        if f.startswith(SKIPPED_PREFIXES) or os.path.realpath(f).startswith(SKIPPED_PREFIXES):
            skipped.append(f)
            continue
        packages = set().union(*(known.get(n, set()) for n in names[f]))
        if not packages:
            unowned.append((f, needed_by))
        elif not packages & allowed:
            missing[" or ".join(sorted(packages))].append((f, needed_by))
    return missing, unowned, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", required=True, action="append", help="a package list (tools/packages.txt); repeatable")
    ap.add_argument("--build-dir", help="a Ninja build folder: also check the headers its objects include")
    ap.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    ap.add_argument("--scripts", nargs="+", default=[], help="scripts whose programs to check")
    ap.add_argument("binaries", nargs="*")
    args = ap.parse_args()

    try:
        return run(args)
    except (OSError, UsageError) as e:
        print(f"check_packages.py: {e}", file=sys.stderr)
        return 2


def run(args):
    listed = [name for path in args.list for name in read_list(path)]
    packages = installed_packages()
    not_installed = [n for n in listed if n not in packages]
    allowed = closure(listed, packages)
    print(f"{' + '.join(args.list)}: {len(listed)} packages; with their Depends closure and the base system, "
          f"{len(allowed)} of the {len(packages)} installed here")
    failed = False
    if not_installed:
        print(f"listed but not installed here (install the list first): {' '.join(not_installed)}")
        failed = True

    libraries, unresolved = linked_libraries(args.binaries)
    kinds = [("library", "loaded by", libraries)] if args.binaries else []
    if args.scripts:
        kinds.append(("program", "run by", script_programs(args.scripts)))
    if args.build_dir:
        if os.path.exists(os.path.join(args.build_dir, ".ninja_deps")):
            kinds.append(("header", "included by", included_headers(args.build_dir, args.source_dir)))
        else:
            print(f"{args.build_dir} is not a Ninja build folder: headers not checked")
    for name, binary in unresolved:
        print(f"MISSING library {name}: ldd finds no file for it (loaded by {binary})")
        failed = True
    for kind, verb, files in kinds:
        missing, unowned, skipped = check(files, allowed)
        print(f"{kind} files: {len(files)}; packages missing: {len(missing)}; files of no package: {len(unowned)}; "
              f"skipped (under {', '.join(SKIPPED_PREFIXES)}, not a Debian package): {len(skipped)}"
              + (f" ({', '.join(os.path.basename(f) for f in skipped)})" if 0 < len(skipped) <= 10 else ""))
        for package, uses in sorted(missing.items()):
            f, needed_by = uses[0]
            more = f" (and {len(uses) - 1} more of its files)" if len(uses) > 1 else ""
            print(f"MISSING package {package}: provides {f}, {verb} {needed_by}{more}")
        for f, needed_by in unowned:
            print(f"MISSING {kind} {f} ({verb} {needed_by}) belongs to no Debian package")
        failed = failed or bool(missing) or bool(unowned)
    print("package list: " + ("INCOMPLETE" if failed else "complete"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
