"""Typed models of the Dynamo custom resources the renderer reads."""
