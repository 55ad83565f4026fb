"""esopt: evolution-strategies fine-tuning of LLM agents."""

__version__ = "0.1.0"
