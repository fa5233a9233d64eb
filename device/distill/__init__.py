"""Distillation: the notetaking service, the offline distiller, the LLM seam."""
