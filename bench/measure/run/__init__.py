"""``bench run``, bottom up: synthetic prompts (:mod:`.prompts`), the loops that drive one level
(:mod:`.loops`), the workloads in their registry (:mod:`.workloads`) and the options a run is
given (:mod:`.options`), the steady-state window (:mod:`.window`) and a level's summary
(:mod:`.levels`), the result types and file (:mod:`.results`, schema ``result.schema.json``),
the run itself (:mod:`.benchmark`), and its terminal progress and summary table (:mod:`.progress`,
its figures written by :mod:`.figures`).
Agent sessions: what they send and draw (:mod:`.agent_script`), the ``agent`` workload and its
loop (:mod:`.agent`), a level's sessions and tool calls (:mod:`.agent_sessions`), and their lines
under the summary (:mod:`.agent_report`).
Request traces: reading one and building its prompts (:mod:`.trace`), the ``trace`` workload that
replays one (:mod:`.trace_replay`), and a filed run written as one (:mod:`.trace_export`).
"""
