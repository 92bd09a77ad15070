"""Rules on the secrets: each secret knob is a string of a stated length and alphabet (or '' to
generate one, or none for the token), and no secret rides on an engine's command line through the
extra-argument knobs. A message names the knob and the rule, never the value.

:data:`SECRET_KNOBS` is the one list of what is secret: preflight hides these values in every
message (``bench.rig.inputs``), whatever the other knobs are named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.rig.engines import ENGINES
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, err

# A token as API keys and session secrets are written: letters, digits and - . _ ~ + / =
# (base64 and URL-safe alphabets), which pass through an HTTP header and an environment file as they are.
TOKEN_ALPHABET = re.compile(r"[A-Za-z0-9._~+/=-]*")
TOKEN_WORDS = "letters, digits and - . _ ~ + / ="
# Hugging Face access tokens: letters, digits, _ and -.
HF_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")
# A password may hold any printable character; control characters (a newline, a tab) are refused.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class SecretRule:
    """What a supplied value of one secret knob must be ('' always passes: generated, or no token)."""

    minimum: int
    maximum: int
    alphabet: re.Pattern[str] | None  # None: any character but control characters
    words: str  # the alphabet as the message says it


SECRET_RULES: dict[str, SecretRule] = {
    "llmrig_api_key": SecretRule(16, 512, TOKEN_ALPHABET, TOKEN_WORDS),
    "open_webui_secret_key": SecretRule(16, 512, TOKEN_ALPHABET, TOKEN_WORDS),
    "open_webui_admin_password": SecretRule(12, 256, None, "printable characters, no line break or tab"),
    "llmrig_hf_token": SecretRule(16, 256, HF_ALPHABET, "letters, digits, _ and -"),
}
# Secrets whose shape another rule checks (bench.rig.rules.backup): the restic repository's
# password, the backend's credentials and a heartbeat URL that may carry a token.
OTHER_SECRETS = ("backup_password", "backup_environment", "backup_heartbeat_url")
SECRET_KNOBS = frozenset((*SECRET_RULES, *OTHER_SECRETS))

# Engine flags that take a secret: on a command line it shows in ps, the journal and deployment.json.
SECRET_FLAGS = ("--api-key", "--hf-token", "--token")


def secret_problem(name: str, value: object) -> Problem | None:
    """The one problem with a supplied secret, naming the rule it breaks and never its value."""
    rule = SECRET_RULES[name]
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        kind = {list: "a list", dict: "a mapping", bool: "true or false"}.get(type(value), "a number")
        return Problem(name, f"must be a string, got {kind} (value not shown)")
    if not rule.minimum <= len(value) <= rule.maximum:
        empty = "for anonymous downloads" if name == "llmrig_hf_token" else "to generate one"
        return Problem(name, f"needs {rule.minimum} to {rule.maximum} characters, or '' {empty} (value not shown)")
    allowed = rule.alphabet.fullmatch(value) is not None if rule.alphabet else CONTROL.search(value) is None
    if not allowed:
        return Problem(name, f"may hold only {rule.words} (value not shown)")
    return None


def rule_secrets(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Every supplied secret follows its rule, and no secret rides on an engine's command line
    through the extra-argument knobs."""
    problems = [found for name in SECRET_RULES if (found := secret_problem(name, knobs.get(name))) is not None]
    for knob in (engine.extra_args_knob for engine in ENGINES if engine.extra_args_knob):
        value = knobs.get(knob)
        for arg in value if isinstance(value, list) else []:
            flag = str(arg).split("=", 1)[0]
            if flag in SECRET_FLAGS:
                problems += err(
                    knob,
                    f"{flag} would put a secret on the command line (ps, the journal, deployment.json); "
                    "set llmrig_api_key / llmrig_hf_token instead, which reach the engine from 0600 files",
                )
    return problems
