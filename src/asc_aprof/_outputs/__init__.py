"""What results become: JSON reports, the HTML report, Perfetto traces."""
