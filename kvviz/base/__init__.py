"""The foundation every room stands on: errors (`errors`), engine defaults (`defaults`), bounds on
input (`inputs`), row formats and page regions (`formats`, `regions`), published numbers
(`published`), words (`text`), quiet third-party imports (`quiet`), signals (`signals`) and lazy
re-exports (`lazy`). Import the submodules; this package exports nothing itself."""
