"""Plain data passed between the engine and its callers: requests, settings, events, results.

Nothing here touches MLX or imports the rest of the engine (tests/test_layers.py checks it),
so the GUI, the server and every engine layer can import it freely. One module per concern;
this package re-exports them all, so `from engine.types import ChatRequest` is the way in.
"""

from engine.types.diagnostics import (
    Diagnostic,
    ValidationReport,
)
from engine.types.events import (
    ChatEvent,
    Finished,
    LoadProgress,
    PrefillProgress,
    ReasoningDelta,
    TextDelta,
    TokenLogprobs,
    ToolCallDelta,
)
from engine.types.images import ImageInput
from engine.types.pool import (
    MODEL_KINDS,
    ModelKind,
    ModelState,
    PooledModel,
    PoolSnapshot,
)
from engine.types.reasoning import (
    EFFORT_BUDGETS,
    ReasoningFormat,
    effort_budget,
)
from engine.types.request import (
    KIND_NAMES,
    ChatMessage,
    ChatRequest,
    ChatRole,
    CompiledConstraint,
    ConstraintKind,
    ConstraintSpec,
    ConstraintUse,
    FunctionCall,
    FunctionChoice,
    FunctionDefinition,
    JSONObject,
    NamedToolChoice,
    SchemaOptions,
    ToolCallMessage,
    ToolChoiceOption,
    ToolDefinition,
)
from engine.types.result import (
    MAX_TOP_LOGPROBS,
    AsWrittenCheck,
    ChatResult,
    ErrorKind,
    GenerationStats,
    StopReason,
    TokenAlternative,
    TokenLogprob,
    ToolCall,
    logprobs_summary,
)
from engine.types.sampling import (
    SamplingSettings,
    check_sampling,
)
from engine.types.state import (
    DEFAULT_MAX_ROWS,
    CacheStats,
    EngineSnapshot,
    MemoryPlan,
    ModelInfo,
)

__all__ = [
    "AsWrittenCheck",
    "CacheStats",
    "ChatEvent",
    "ChatMessage",
    "ChatRequest",
    "ChatResult",
    "ChatRole",
    "CompiledConstraint",
    "ConstraintKind",
    "ConstraintSpec",
    "ConstraintUse",
    "DEFAULT_MAX_ROWS",
    "EFFORT_BUDGETS",
    "Diagnostic",
    "EngineSnapshot",
    "ErrorKind",
    "Finished",
    "FunctionCall",
    "FunctionChoice",
    "FunctionDefinition",
    "GenerationStats",
    "ImageInput",
    "JSONObject",
    "KIND_NAMES",
    "LoadProgress",
    "MAX_TOP_LOGPROBS",
    "MemoryPlan",
    "MODEL_KINDS",
    "ModelInfo",
    "ModelKind",
    "ModelState",
    "NamedToolChoice",
    "PoolSnapshot",
    "PooledModel",
    "PrefillProgress",
    "ReasoningDelta",
    "ReasoningFormat",
    "SamplingSettings",
    "SchemaOptions",
    "StopReason",
    "TextDelta",
    "TokenAlternative",
    "TokenLogprob",
    "TokenLogprobs",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallMessage",
    "ToolChoiceOption",
    "ToolDefinition",
    "ValidationReport",
    "check_sampling",
    "effort_budget",
    "logprobs_summary",
]
