"""Every command's flags, in one package: the only place in clip_cycles that imports argparse.

One module per command or family of commands (``eval``, ``build``, ``probe``/``transfer``/``oe``,
...). Each declares ONE typed options model (a :class:`clip_cycles.schemas.options.Options`
subclass whose fields declare their flags) and exposes ``configure_parser(parser)``, which derives
the parser from it (:mod:`clip_cycles.commands.derived`) and sets ``func`` to build the options from
the namespace and call the command's function with them. Nothing below this package sees an
``argparse.Namespace``. :mod:`clip_cycles.commands.main`
holds the command registry and the ``clip-cycles`` entry point; :mod:`clip_cycles.commands.flags`
the light flags several commands share (verbosity, finite numbers, seeds) and
:mod:`clip_cycles.commands.model_flags` how a command takes the model flags. The clip_benchmark plugin's parser patch
(:mod:`clip_cycles.commands.clip_benchmark`) and its start-up hook (``_activation``) live here too.
"""
