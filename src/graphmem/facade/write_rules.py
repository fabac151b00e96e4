"""What every write checks before the files change: its size, and secrets redacted."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ValidationError
from ..redact import redact
from ..settings import Settings


class WriteRules:
    """The size limit and the redaction switch of one ``Settings``."""

    def __init__(self, settings: Settings):
        self.settings = settings

    def clean(self, value: Any) -> Any:
        """``value`` with secrets replaced (unchanged when ``GRAPHMEM_REDACT`` is off)."""
        return redact(value) if self.settings.redact else value

    def check_size(self, value: Any, field: str) -> None:
        """Refuse a value over ``GRAPHMEM_MAX_ITEM_BYTES`` (ValidationError naming ``field``)."""
        size = len(str(value).encode("utf-8", "surrogatepass"))
        if size > self.settings.max_item_bytes:
            raise ValidationError(f"is {size} bytes, over the limit of {self.settings.max_item_bytes} "
                                  "(GRAPHMEM_MAX_ITEM_BYTES)", field=field)

    def check_json_size(self, value: Any, field: str) -> None:
        """``check_size`` of a string, or of a JSON value as it is stored (None passes)."""
        if value is not None:
            self.check_size(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False),
                            field)
