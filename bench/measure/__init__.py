"""The measuring harness: every ``bench`` command that talks to a served endpoint or reads what one
answered. A staircase of subpackages, each importing only the floors below it (the import-linter
``layers`` contract in pyproject.toml, run by scripts/lint, keeps it so):

7. :mod:`~bench.measure.report`: ``bench report``'s cards, plots and page;
6. :mod:`~bench.measure.compare`: the result store by tag, ``bench tags``, ``compare`` and
   ``history``, their statistics, and the probe gate that decides which tags are ranked;
5. :mod:`~bench.measure.probe` and :mod:`~bench.measure.capacity` (neither imports the other):
   ``bench probe`` and ``bench capacity``, each with its result file;
4. :mod:`~bench.measure.run`: ``bench run``: prompts, workloads, options, the loops that drive a
   level, a level's summary, the run, its result file and its terminal output;
3. :mod:`~bench.measure.stream` and :mod:`~bench.measure.telemetry` (independent): one streamed
   request; what the server, the GPUs and Ollama report beside it;
2. :mod:`~bench.measure.metrics` (per-request numbers and summaries, pure) and
   :mod:`~bench.measure.target` (where a command goes: endpoint, key, model, tag, from
   deployment.json and the flags).

Below them, shared with the rig core: :mod:`bench.codec` (typed JSON), :mod:`bench.documents`
(versioned files and their committed schemas) and :mod:`bench.errors`. Each subpackage's own
docstring is the map of its modules. The harness takes from :mod:`bench.rig` only the names that
package exports, and never imports the CLI. The Ansible side never imports this package.
"""
