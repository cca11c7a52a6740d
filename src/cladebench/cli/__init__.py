"""The ``cladebench`` command: one verb per step of the flow, each generated from its config.

This package presents the command on purpose: :func:`main` (what ``cladebench`` runs), :func:`build_parser`,
and the registries :data:`VERBS` and :data:`FAMILIES` it builds the parser from. The verbs live in one module
per group (:mod:`~cladebench.cli.data`, :mod:`~cladebench.cli.curate`, :mod:`~cladebench.cli.evaluation`,
:mod:`~cladebench.cli.benchmarks`, :mod:`~cladebench.cli.suite`, :mod:`~cladebench.cli.demo`) and register themselves in
:mod:`~cladebench.cli.verbs`. Heavy modules are imported inside each verb, so ``cladebench --help`` starts in a
fraction of a second. Abbreviated options
(``--out`` as ``--o``) are refused everywhere: a script that relies on one breaks when an option is added.
What the libraries underneath log and warn stays off the terminal unless ``--verbose`` is given, before or
after the verb (:mod:`cladebench.quiet`); ``--quiet`` drops progress bars and notes (:mod:`cladebench.console`).

Exit codes a script can trust: 0 success; 1 a failure of the input or environment; 2 a usage error
(bad arguments, unknown name); 3 no dataset at the path; 4 a schema error; 5 a remote URI (dataset
or model) that cannot be reached; 6 a model that cannot be built from its files; 70 a bug (an
unexpected exception, reported as one); 130 interrupted; 141 the output pipe closed (`| head`), without a message.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from cladebench import __version__
from cladebench.cli import (  # noqa: F401  (each registers its verbs)
    benchmarks,
    curate,
    data,
    demo,
    evaluation,
    export,
    reviews,
    serve,
    suite,
)
from cladebench.cli.verbs import FAMILIES, VERBS, Family, Verb, verb
from cladebench.config import (
    add_config_arguments,
    config_from_args,
    shown_options,
    take_late_positionals,
    usage_line,
)
from cladebench.console import quieted
from cladebench.environment import DEBUG, flag
from cladebench.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_BUG,
    EXIT_INTERRUPTED,
    CladebenchError,
    environment_error,
    unknown_name,
)
from cladebench.quiet import third_party_output

__all__ = ["FAMILIES", "VERBS", "Family", "Verb", "build_parser", "main", "verb"]


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=40, width=120)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a mistake on the command line is one line (the option and what is wrong with it)
    and exit 2, like every other usage error, instead of the whole usage block; ``--help`` still shows it, one
    screen wide whatever the terminal (options and their help side by side)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """An unknown verb, task, source or builder is the registry's error (the known names and the closest one),
        raised where the name is read rather than recovered from argparse's English message."""
        if action.choices is not None and value not in action.choices:
            metavar = action.metavar if isinstance(action.metavar, str) else None  # a tuple names several values
            self.error(str(unknown_name((metavar or action.dest or "choice").lower().replace("|", " or "),
                                        value, list(action.choices))))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser with one sub-command per registered verb (sub-parsers are :class:`_Parser` too). Given the
    command line, only the verb it names gets its arguments (and imports its config's module): ``cladebench
    --help`` and a mistyped verb then import no Lance, scipy or torch."""
    parser = _Parser(
        prog="cladebench", allow_abbrev=False,
        description="Curate, store, evaluate and inspect benchmarks for biological vision(-language) models.",
        epilog="Exit codes: 0 ok, 1 failure, 2 usage, 3 no dataset, 4 schema error, 5 remote unreachable, "
        "6 model cannot be built, 70 bug, 130 interrupted, 141 output pipe closed.",
    )
    parser.add_argument("--version", action="version", version=f"cladebench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    chosen = None if argv is None else _chosen(argv)
    for name in sorted({*VERBS, *FAMILIES}):
        whole = chosen is None or chosen[0] == name  # every other verb: its name and help only
        if name in FAMILIES:
            family = FAMILIES[name]
            family_parser = sub.add_parser(name, help=family.help, description=family.help, allow_abbrev=False)
            _add_late_verbose(family_parser)
            if not whole:
                continue
            kinds = family_parser.add_subparsers(dest="kind", metavar=family.metavar, required=True)
            aliases = family.aliases()
            wanted = None if chosen is None or chosen[1] is None else aliases.get(chosen[1], chosen[1])
            for kind, member in family.members().items():
                member_parser = kinds.add_parser(kind, help=member.help, allow_abbrev=False,
                                                 aliases=[old for old, new in aliases.items() if new == kind])
                if wanted is None or wanted == kind:
                    _add_verb_arguments(member_parser, member, f"cladebench {name} {kind}")
            continue
        verb_parser = sub.add_parser(name, help=VERBS[name].help, allow_abbrev=False)
        if whole:
            _add_verb_arguments(verb_parser, VERBS[name], f"cladebench {name}")
        else:
            _add_late_verbose(verb_parser)
    return parser


def _add_verb_arguments(parser: argparse.ArgumentParser, verb: Verb, prog: str) -> None:
    """A verb's description, usage and arguments, from its config class (imported here)."""
    config = verb.config_class()
    parser.description = (config.__doc__ or verb.help).strip()
    parser.usage = usage_line(prog, config)
    add_config_arguments(parser, config)
    if shown_options(config) is not None:  # two tiers: the daily options, and every setting by key
        from cladebench.tiers import add_tier_arguments

        add_tier_arguments(parser, config, prog)
    _add_late_verbose(parser)


def _chosen(argv: Sequence[str]) -> tuple[str, str | None]:
    """The verb (and a family's member) a command line names: its first words that are not options; ``""`` when
    it names no known verb (the parser then shows the verbs, or refuses the word with the known names)."""
    words = [word for word in argv if not word.startswith("-")]
    if not words or words[0] not in {*VERBS, *FAMILIES}:
        return "", None
    return words[0], (words[1] if words[0] in FAMILIES and len(words) > 1 else None)


VERBOSE_HELP = "also show what the libraries underneath (Lance, huggingface_hub, open_clip) log and warn"
QUIET_HELP = "no progress bars and no notes on stderr (warnings and errors are still shown)"


def _add_late_verbose(parser: argparse.ArgumentParser) -> None:
    """``--verbose`` and ``--quiet`` after the verb too (``cladebench info DS --verbose``). SUPPRESS as the
    default: a sub-parser's default would overwrite the option given before the verb."""
    parser.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    parser.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)


def _whose_options(args: argparse.Namespace, extra: Sequence[str]) -> str:
    """For a family (``eval``, ``load``, ``build``), which other members take the options given to the wrong one
    (``--shots is an option of eval fewshot; ``), so the one line says where the option belongs."""
    if args.verb not in FAMILIES:
        return ""
    members = FAMILIES[args.verb].members()
    notes = []
    for word in dict.fromkeys(w.split("=", 1)[0] for w in extra if w.startswith("-")):
        name = word.lstrip("-").replace("-", "_")
        names = {name, name.removeprefix("no_")}  # --no-unseen-only is the flag of the field unseen_only
        owners = [kind for kind, member in members.items() if kind != args.kind and dataclasses.is_dataclass(
            member.config_class()) and any(f.name in names and f.init for f in dataclasses.fields(
                member.config_class()))]
        if owners:
            shown = ", ".join(f"{args.verb} {kind}" for kind in owners[:3]) + (" ..." if len(owners) > 3 else "")
            notes.append(f"{word} is an option of {shown}; ")
    return "".join(notes)


def _keyed(config: type, args: argparse.Namespace) -> dict[str, tuple[str, object]]:
    """The settings given by key (``--setting``, ``--settings``) to a verb whose config has two tiers."""
    if shown_options(config) is None:
        return {}
    from cladebench.tiers import keyed_settings

    return keyed_settings(config, args, f"cladebench {args.verb}" + (f" {args.kind}" if args.verb in FAMILIES else ""))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (``cladebench`` exits with it)."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(argv)  # imports the chosen verb's modules: a Ctrl-C here is an interrupt too
        args, extra = parser.parse_known_args(argv)
    except KeyboardInterrupt:
        print("cladebench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    debug = args.debug or flag(DEBUG)
    # third_party_output before any verb imports lance: it reads LANCE_LOG once
    with third_party_output(verbose=args.verbose), quieted(args.quiet):
        return _run(parser, args, extra, debug)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str], debug: bool) -> int:
    """The chosen verb run on the parsed arguments; its exit code, every failure as one line."""
    chosen = FAMILIES[args.verb].member(args.kind) if args.verb in FAMILIES else VERBS[args.verb]
    extra = take_late_positionals(chosen.config_class(), args, extra)
    if extra:
        command = f"{parser.prog} {args.verb}" + (f" {args.kind}" if args.verb in FAMILIES else "")
        parser.exit(2, f"{command}: error: unrecognized arguments: {' '.join(extra)} "
                       f"({_whose_options(args, extra)}see {command} --help)\n")
    try:
        config: object = config_from_args(chosen.config_class(), args, _keyed(chosen.config_class(), args))
        return int(chosen.run(config) or 0)
    except CladebenchError as exc:
        if debug:
            traceback.print_exc()
        print(f"cladebench {args.verb}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"cladebench {args.verb}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`| head`): stop quietly, and point stdout at nothing so the
        # interpreter's final flush does not fail on the same closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        if debug:
            traceback.print_exc()
        # A safety net under the checks each verb makes: a read-only or full disk, a file where a folder
        # should be (or the reverse) is the environment's doing, not a bug, wherever it surfaces.
        environment = environment_error(exc)
        if environment is not None:
            print(f"cladebench {args.verb}: error: {environment}", file=sys.stderr)
            return environment.exit_code
        print(
            f"cladebench {args.verb}: internal error (a bug, please report it): {type(exc).__name__}: {exc}\n"
            "rerun with --debug for the traceback",
            file=sys.stderr,
        )
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
