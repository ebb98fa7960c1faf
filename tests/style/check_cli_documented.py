#!/usr/bin/env python3
"""Every command-line option the programs take is documented and shown (issue 14 item 7, issue
32 item 5).

The code registers its options with CLI11 (`add_option("--steps", ...)`, `add_flag(...)`,
`add_option_function<T>(...)`): in client/main.cc per subcommand (`line.report->add_option`), in
daemon/server/daemon_options.cc for flopscoped. The subcommands are those `flopscope --help`
lists (the importer is `flopscope import`; it has no program of its own). For each option, the
registered ones and every one `--help` shows, this checks that
  1. docs/cli.md's section of its program or subcommand (`## flopscope SUB ...`, `## flopscoped`)
     names it as `--name` (or `-x` for a short option without a long name), and that every
     subcommand has such a section;
  2. `--help` of its program or subcommand shows it (CLI11 lists what was registered, so this
     catches an option registered on the wrong subcommand or hidden by a missing group);
  3. the other way round, every option a docs/cli.md section's table names in its first column
     is one its program's or subcommand's `--help` lists, and so is every `flopscope SUB ...
     --name` that README shows in a code block (stale docs, such as an old spelling that is now
     refused).
Environment variables the help text names (`$FLOPSCOPE_...`) must be in README too. Defaults that
depend on the machine (the socket path) are never compared as text.

Exit 0 when everything is there; 1 with what is missing and where it is registered; 77 (skip)
when the programs are not built.

Usage: check_cli_documented.py --root SOURCE_DIR --build BUILD_DIR
"""

import argparse
import pathlib
import re
import subprocess
import sys

REGISTER = re.compile(
    r"(?:(?P<owner>line\.\w+|app|options)\s*(?:->|\.)\s*)?"
    r"add_(?:option|flag|option_function<[^>]*>)\(\s*\"(?P<names>[^\"]+)\"")
SUBCOMMAND = re.compile(r"line\.(\w+)\s*=\s*app\.add_subcommand\(\s*\"([\w-]+)\"", re.S)
HELP_OPTION = re.compile(r"^\s{2}(-[\w-]+(?:,--[\w-]+)?)\b", re.M)
ENV_IN_HELP = re.compile(r"\$(FLOPSCOPE_[A-Z0-9_]+)")
DOC_LINK = re.compile(r"\]\((docs/[\w./-]+\.md)\)")
USAGE_LINE = re.compile(r"^\s*flopscope (\w+)\b(.*)$", re.M)
SUBCOMMANDS_BLOCK = re.compile(r"^Subcommands:\n((?:  .*\n?)+)", re.M)
CLI_SECTION = re.compile(r"^## (flopscoped|flopscope (\w+))\b.*$", re.M)
TABLE_FIRST_CELL = re.compile(r"^\|([^|\n]*)\|", re.M)
DAEMON = "flopscoped"  # the key of flopscoped's section among the subcommands'


def option_names(spec):
    """'-o,--output' -> ['-o', '--output']; positionals ('JOB') give nothing."""
    return [name for name in spec.split(",") if name.startswith("-")]


def shown_name(names):
    """The spelling a document uses: the long name when there is one."""
    longs = [name for name in names if name.startswith("--")]
    return longs[0] if longs else names[0]


def registered_client_options(root):
    """{subcommand: {shown name: 'file:line'}} from client/main.cc."""
    path = root / "client" / "main.cc"
    text = path.read_text()
    members = {member: name for member, name in SUBCOMMAND.findall(text)}
    found = {name: {} for name in members.values()}
    for match in REGISTER.finditer(text):
        owner = (match.group("owner") or "").removeprefix("line.")
        names = option_names(match.group("names"))
        if owner not in members or not names:
            continue
        line = text.count("\n", 0, match.start()) + 1
        found[members[owner]].setdefault(shown_name(names), f"{path.relative_to(root)}:{line}")
    return found


def registered_daemon_options(root):
    path = root / "daemon" / "server" / "daemon_options.cc"
    text = path.read_text()
    found = {}
    for match in REGISTER.finditer(text):
        names = option_names(match.group("names"))
        if names:
            line = text.count("\n", 0, match.start()) + 1
            found.setdefault(shown_name(names), f"{path.relative_to(root)}:{line}")
    return found


def documentation(root):
    """README.md and every docs/ page it links to, as one text."""
    readme = (root / "README.md").read_text()
    pages = [readme]
    for link in sorted(set(DOC_LINK.findall(readme))):
        page = root / link
        if page.is_file():
            pages.append(page.read_text())
    return "\n".join(pages)


def listed_subcommands(top_help):
    """The subcommands `flopscope --help` lists."""
    block = SUBCOMMANDS_BLOCK.search(top_help)
    if not block:
        return []
    return [line.split()[0] for line in block.group(1).splitlines() if line.strip()]


def cli_sections(root):
    """{subcommand or 'flopscoped': its docs/cli.md section's text}."""
    text = (root / "docs" / "cli.md").read_text()
    heads = list(CLI_SECTION.finditer(text))
    sections = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        key = DAEMON if head.group(1) == DAEMON else head.group(2)
        sections[key] = sections.get(key, "") + text[head.start():end]
    return sections


def table_options(section):
    """The options a section's table names in its first column (`--server HOST:PORT`, ...)."""
    names = set()
    for cell in TABLE_FIRST_CELL.findall(section):
        names.update(re.findall(r"(?<![\w-])(--[A-Za-z][\w-]*|-[A-Za-z])(?![\w-])", cell))
    return names


def help_text(program, *args):
    result = subprocess.run([str(program), *args, "--help"], capture_output=True, text=True,
                            timeout=30)
    return result.stdout + result.stderr


def shown_options(text):
    names = set()
    for spec in HELP_OPTION.findall(text):
        names.add(shown_name(option_names(spec)))
    return names


def help_names(text):
    """Every spelling --help shows, short names and aliases included ('-o', '--tcp', '--listen')."""
    names = set()
    for spec in HELP_OPTION.findall(text):
        names.update(option_names(spec))
    return names


def documented(name, docs):
    return re.search(re.escape(name) + r"(?![\w-])", docs) is not None


def readme_usage(readme):
    """{subcommand: {--name, ...}} from the `flopscope SUB ...` lines of README's code blocks."""
    blocks = re.findall(r"```\n(.*?)```", readme, re.S)
    used = {}
    for block in blocks:
        for sub, rest in USAGE_LINE.findall(block):
            rest = rest.split("#", 1)[0].split(" -- ", 1)[0]
            used.setdefault(sub, set()).update(re.findall(r"(?<![\w-])(--[\w-]+)", rest))
    return used


def check_program(label, where_of, help_output, section, problems):
    """Options of one program or subcommand against its --help and its docs/cli.md section."""
    shown = shown_options(help_output)
    if section is None:
        problems.append(f"docs/cli.md has no section for {label} (`## {label} ...`)")
        section = ""
    for name in sorted(set(where_of) | shown - {"--help"}):
        where = where_of.get(name, f"{label} --help")
        if not documented(name, section):
            problems.append(f"{where}: {label} {name} is not in docs/cli.md's {label} section")
        if name in where_of and name not in shown:
            problems.append(f"{where}: {label} --help does not show {name}")
    for name in sorted(table_options(section) - help_names(help_output) - {"--help"}):
        problems.append(f"docs/cli.md: {label} {name} is documented but {label} --help has "
                        f"no {name}")


def check(root, build):
    problems = []
    docs = documentation(root)
    sections = cli_sections(root)
    helps = {}
    flopscope, flopscoped = build / "bin" / "flopscope", build / "bin" / "flopscoped"
    registered = registered_client_options(root)
    subcommands = listed_subcommands(help_text(flopscope))
    if not subcommands:
        problems.append("flopscope --help lists no subcommands")
    for sub in sorted(set(subcommands) | set(registered)):
        helps[sub] = help_text(flopscope, sub)
        if sub not in subcommands:
            problems.append(f"client/main.cc: flopscope --help does not list {sub}")
        check_program(f"flopscope {sub}", registered.get(sub, {}), helps[sub], sections.get(sub),
                      problems)
    for sub in sorted(set(sections) - set(helps) - {DAEMON}):
        problems.append(f"docs/cli.md: a section for `flopscope {sub}`, which is no subcommand")
    daemon_help = help_text(flopscoped)
    check_program(DAEMON, registered_daemon_options(root), daemon_help, sections.get(DAEMON),
                  problems)
    for sub, names in sorted(readme_usage((root / "README.md").read_text()).items()):
        if sub not in helps:
            continue  # not a subcommand (prose), or one README names that no longer exists
        missing = sorted(names - shown_options(helps[sub]) - {"--help"})
        for name in missing:
            problems.append(f"README.md: `flopscope {sub} ... {name}` but flopscope {sub} "
                            f"--help has no {name}")
    for text in [*helps.values(), daemon_help]:
        for variable in sorted(set(ENV_IN_HELP.findall(text))):
            if f"`{variable}`" not in docs:
                problems.append(f"--help names ${variable}, which README.md does not document")
    return sorted(set(problems)), len(helps)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, type=pathlib.Path)
    parser.add_argument("--build", required=True, type=pathlib.Path)
    args = parser.parse_args()
    for program in ("flopscope", "flopscoped"):
        if not (args.build / "bin" / program).is_file():
            print(f"{args.build}/bin/{program} is not built: skipped")
            return 77
    problems, subcommands = check(args.root, args.build)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{subcommands} subcommands and flopscoped checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
