"""The ``agent`` workload: sessions as a coding agent runs them, against one endpoint.

A session is one task. Its requests resend the whole history: the system prompt all sessions
share, the task, and every answer, tool call and tool result so far. ``--concurrency`` sessions
run at a time; each starts no earlier than its place in a Poisson process (``--session-interval``)
and pauses between its requests for a drawn think time (``--think-time``); see
:mod:`bench.measure.run.agent_script` for what is sent and how it is drawn.

- Without tool rounds (``--tool-rounds 0``), each of ``--turns`` turns is one request, and the
  turns after the first bring a tool result written as user text: any server serves it.
- With ``--tool-rounds R``, each turn is the user's message, then R requests that offer the tools
  with ``tool_choice: "required"``: the model's own calls (one or several per answer) are each
  answered with a tool result, and the next request carries them; then one request with
  ``tool_choice: "none"`` for the turn's answer. A round the model answers without a call is
  counted and the session goes on.
- ``--cold-prefix`` adds a second level: the same sessions, with a fresh salt at the head of
  every request, so no request shares a prefix block with another: what the sessions cost
  without the prefix cache, beside what they cost with it.

With one session at a time the server's /metrics is read around every request, so prefix-cache
hits are known turn by turn.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.codec import JsonObject
from bench.errors import ConfigError
from bench.measure.metrics import RequestRecord
from bench.measure.run import agent_script as script
from bench.measure.run.loops import LevelRun, LevelSpec, extra_body, measured, together
from bench.measure.run.prompts import Calibration, PromptFactory, new_salt
from bench.measure.run.workloads import Driver, Option, RunOptions, Workload, at_least_one, register, spec
from bench.measure.stream.client import ChatClient
from bench.measure.telemetry import server


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """The agent workload's shape (the level says how many sessions run at once, and whether cold)."""

    sessions: int
    turns: int
    system_tokens: int
    tool_rounds: int = 0
    tool_result_tokens: int = 512
    think_time_s: float = 0.0
    session_interval_s: float = 0.0

    @property
    def per_session(self) -> int:
        """Requests per session: each turn's tool rounds and its answer."""
        return self.turns * (self.tool_rounds + 1)

    def check(self) -> None:
        """Refuse a shape no session could run; the ConfigError names the flag."""
        counts = {"--sessions": self.sessions, "--turns": self.turns, "--tool-result-tokens": self.tool_result_tokens}
        for flag, value in counts.items():
            if value < 1:
                raise ConfigError(f"{flag}: must be at least 1, got {value}")
        if self.tool_rounds < 0:
            raise ConfigError(f"--tool-rounds: must be 0 or more, got {self.tool_rounds}")
        for flag, seconds in (("--think-time", self.think_time_s), ("--session-interval", self.session_interval_s)):
            if seconds < 0:
                raise ConfigError(f"{flag}: must be 0 or more seconds, got {seconds:g}")


@dataclass(slots=True)
class _Session:
    """What one session sends and keeps: its history, and where its requests are numbered from."""

    number: int
    first_index: int
    messages: list[JsonObject]
    step: int = 0


@dataclass(slots=True)
class _Sessions:
    """Runs the level's sessions; see the module docstring."""

    client: ChatClient
    calibration: Calibration
    level: LevelRun
    agent: AgentSpec
    words: script.AgentScript
    metrics_url: str | None
    on_done: Callable[[RequestRecord], None] | None

    @property
    def answer_body(self) -> JsonObject:
        body = extra_body(self.level.spec)
        return {**body, "tools": list(script.AGENT_TOOLS), "tool_choice": "none"} if self.agent.tool_rounds else body

    @property
    def round_body(self) -> JsonObject:
        temperature = self.level.spec.temperature
        return {"temperature": temperature, "tools": list(script.AGENT_TOOLS), "tool_choice": "required"}

    async def send(self, session: _Session, body: JsonObject, *, tool_round: bool) -> RequestRecord:
        spec, http, url = self.level.spec, self.client.http, self.metrics_url
        await asyncio.sleep(script.think_time_s(spec.seed, session.number, session.step, self.agent.think_time_s))
        messages = session.messages
        if spec.cold_prefix:  # a fresh salt at the head: no prefix block shared with any other request
            messages = [self.words.system(new_salt()), *messages[1:]]
        index = session.first_index + session.step
        per_request = url is not None and spec.in_flight == 1
        before = await server.scrape(http, url) if per_request and url else None
        record = await self.client.chat(index, list(messages), spec.output_tokens, extra_body=body, keep_text=True)
        if per_request and url:
            self.level.per_request_server[index] = server.counter_deltas(before, await server.scrape(http, url))
        calls = (record.tool_calls or ()) if tool_round else None
        record = dataclasses.replace(record, session=session.number, turn=session.step, tool_calls=calls)
        self.level.records.append(record)
        if self.on_done is not None:
            self.on_done(record)
        session.step += 1
        return record

    async def tool_round(self, session: _Session) -> bool:
        """One request that asks for tool calls, and the results of the calls it got; False on an error."""
        record = await self.send(session, self.round_body, tool_round=True)
        if record.error is not None:
            return False
        calls = record.tool_calls or ()
        if not calls:
            session.messages.append({"role": "assistant", "content": record.answer})
            return True
        session.messages.append(script.assistant_calls(record.answer, calls))
        seed = self.level.spec.seed
        for number, call in enumerate(calls):
            where = (session.number, record.turn or 0, number)
            tokens = script.tool_result_tokens(seed, *where, self.agent.tool_result_tokens)
            self.level.tool_result_tokens.append(tokens)
            words = max(1, round(tokens / self.calibration.slope))
            session.messages.append(script.tool_result(seed, where, call, words))
        return True

    async def run(self, number: int, first_index: int, start_s: float) -> None:
        """Session ``number``, from its start time (seconds after the level began)."""
        await asyncio.sleep(max(0.0, start_s - (time.perf_counter_ns() - self.level.started_ns) / 1e9))
        session = _Session(number, first_index + number * self.agent.per_session, [self.words.system()])
        for turn in range(self.agent.turns):
            session.messages.append(self.words.user(number, turn))
            for _ in range(self.agent.tool_rounds):
                if not await self.tool_round(session):
                    return
            record = await self.send(session, self.answer_body, tool_round=False)
            if record.error is not None:
                return
            session.messages.append({"role": "assistant", "content": record.answer})


async def run_agent(
    client: ChatClient,
    prompts: PromptFactory,
    calibration: Calibration,
    level: LevelRun,
    agent: AgentSpec,
    *,
    metrics_url: str | None,
    first_index: int = 0,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> None:
    """Run the level's sessions, ``level.spec.in_flight`` at a time, filling ``level`` as requests finish."""
    spec = level.spec
    words = script.AgentScript(
        prompts,
        system_words=max(1, round(agent.system_tokens / calibration.slope)),
        turn_words=max(1, round(spec.input_tokens / calibration.slope)),
        tools_in_prompt=agent.tool_rounds == 0,
    )
    runner = _Sessions(client, calibration, level, agent, words, metrics_url, on_done)
    starts = script.session_starts_s(spec.seed, agent.sessions, agent.session_interval_s)
    numbers = iter(range(agent.sessions))

    async def worker() -> None:
        for number in numbers:
            await runner.run(number, first_index, starts[number])

    # Per-request scrapes already bracket every request; no background sampler beside them.
    async with measured(level, client.http, metrics_url, sample=False):
        await together([worker() for _ in range(spec.in_flight)])


def refused_tools(records: list[RequestRecord]) -> str | None:
    """Why the level's tool rounds could not run (the server refused ``tools``), or None."""
    refused = [r for r in records if r.tool_calls is not None and r.error is not None and r.error.startswith("http_4")]
    if refused and len(refused) == sum(1 for r in records if r.tool_calls is not None):
        said = refused[0].error_message or refused[0].error
        return f"the server refused every tool round ({said}); serve with tool calling, or run with --tool-rounds 0"
    return None


@register
class Agent(Workload):
    name = "agent"
    summary = "coding-agent sessions: growing history, tool calls, think time"
    options = (
        Option("concurrency", "--concurrency", int, (1,), "sessions at a time", many=True),
        Option("sessions", "--sessions", int, 4, "agent: sessions (run --concurrency at a time)"),
        Option("turns", "--turns", int, 6, "agent: turns per session (--input-tokens new each)"),
        Option("system_tokens", "--system-tokens", int, 2048, "agent: shared system prompt and tool schemas"),
        Option(
            "tool_rounds",
            "--tool-rounds",
            int,
            0,
            "agent: requests per turn that ask for the model's own tool calls (0: tool results as user text)",
        ),
        Option("tool_result_tokens", "--tool-result-tokens", int, 512, "agent: median tool result, tokens"),
        Option("think_time", "--think-time", float, 0.0, "agent: mean pause between a session's requests, s"),
        Option("session_interval", "--session-interval", float, 0.0, "agent: mean gap between session starts, s"),
        Option("cold_prefix", "--cold-prefix", bool, False, "agent: also run the sessions with no shared prefix"),
    )

    def check(self, options: RunOptions) -> None:
        if len(options.ints("concurrency")) != 1:
            raise ConfigError("--concurrency: the agent workload takes one value, the sessions run at a time")
        self.shape(options).check()

    @staticmethod
    def shape(options: RunOptions) -> AgentSpec:
        return AgentSpec(
            sessions=options.integer("sessions"),
            turns=options.integer("turns"),
            system_tokens=options.integer("system_tokens"),
            tool_rounds=options.integer("tool_rounds"),
            tool_result_tokens=options.integer("tool_result_tokens"),
            think_time_s=options.floats("think_time")[0],
            session_interval_s=options.floats("session_interval")[0],
        )

    def levels(self, options: RunOptions) -> list[LevelSpec]:
        at_least_one("--concurrency", options.ints("concurrency"), "level")
        (at_once,) = options.ints("concurrency")
        agent = self.shape(options)
        agent.check()
        warm = spec(
            options, options.input_tokens, sessions_at_once=at_once, requests=agent.sessions * agent.per_session
        )
        return [warm, dataclasses.replace(warm, cold_prefix=True)] if options.flag("cold_prefix") else [warm]

    async def drive(self, level: LevelRun, driver: Driver) -> None:
        await run_agent(
            driver.client,
            driver.prompts,
            driver.calibration,
            level,
            self.shape(driver.options),
            metrics_url=driver.metrics_url,
            first_index=driver.first_index,
            on_done=driver.on_done,
        )
        refused = refused_tools(level.records)
        if refused is not None:
            raise ConfigError(refused)
