"""Reflect's scenario harness (seed 000, §5; issue 34): does a model connected to Arbiter use the memory well?

    ANTHROPIC_API_KEY=... python -m bench.scenarios [--reps 3] [--briefing full|flat-tags|none]
    python -m bench.scenarios --fake [--agent careful|careless]

Modules, in the order a run uses them: `corpus` (the fixture memory, seeded
into a fresh tenant per run), `driver` (the MCP client and the Messages
API's tool use, recorded as a transcript), `scenarios` (the ten prompts,
their hard assertions and rubric questions), `judge` (the rubric verdict in
strict JSON), `runner` (repetitions and the scoreboard). `tools` holds every
MCP tool name and argument shape the others use; `agents` the scripted
agents `--fake` puts behind the fake Messages server. docs/benchmarks.md
says what a run costs and what the scripts score.
"""
