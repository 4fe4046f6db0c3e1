"""Every command's flags, in one package: the only place in clip_cycles that imports argparse.

One module per command or family of commands (``eval``, ``build``, ``probe``/``transfer``/``oe``,
...). Each exposes ``configure_parser(parser)``, which adds the command's flags and sets
``func``, and a thin ``run(args)`` that turns the parsed namespace into ONE typed options object
(a :class:`clip_cycles.schemas.options.Options` subclass, or an existing options dataclass such
as :class:`~clip_cycles.encoding.run_context.ModelOptions`) and calls library functions with it.
Nothing below this package sees an ``argparse.Namespace``. :mod:`clip_cycles.commands.main`
holds the command registry and the ``clip-cycles`` entry point; :mod:`clip_cycles.commands.flags`
the light flags several commands share (verbosity, finite numbers, seeds) and
:mod:`clip_cycles.commands.model_flags` the model flags. The clip_benchmark plugin's parser patch
(:mod:`clip_cycles.commands.clip_benchmark`) and its start-up hook (``_activation``) live here too.
"""
