"""Office Open XML documents: Word (``word``: ``parse_docx``), PowerPoint (``slides``: ``parse_pptx``)
and Excel (``sheets``: ``parse_xlsx``, beside ``parse_csv`` for CSV and TSV files), read by
python-docx, python-pptx and openpyxl after ``common`` has checked the zip (and refused compound
files: password-protected packages, legacy binary formats). Reads bytes; writes nothing.
"""
