from arrc.repl.terminal import main

raise SystemExit(main())
