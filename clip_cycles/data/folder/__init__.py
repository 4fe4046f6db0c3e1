"""The built dataset folder: its writer and verifier, reader, independent audit, card, and the folder builders."""
