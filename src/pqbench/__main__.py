from pqbench.cli import main

raise SystemExit(main())
