"""The shell harness with the OCR engine loaded at import, i.e. before the sandbox's guard
goes up: onnxruntime's native libraries and the model files load as trusted code, and the
untrusted commands only call into them. Used when a page is not in the OCR cache."""

from esopt.tools.ocr import warm_up
from esopt.tools.shell import run_commands

warm_up()

__all__ = ["run_commands"]
