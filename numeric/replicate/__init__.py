"""Every recorded run rebuilt by one command (``python -m numeric replicate``), with shipped manifests.

- ``registry``: the recorded runs, each NAME the exact list of commands with their flags (``registry.json``);
- ``run``: run (or resume) a NAME into one directory, or a test slice of it;
- ``manifest``: record a finished run's manifest from its exactly verified files; read one back (untrusted);
- ``check``: compare a rebuilt run with its manifest, per artifact;
- ``cli``: the command line (``docs/replicate.md``).
"""
