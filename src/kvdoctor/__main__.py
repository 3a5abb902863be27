from kvdoctor.cli import entry

entry()
