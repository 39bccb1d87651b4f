"""Pages as users load them (issue 38, item 3): a single-resource page, and multi-origin pages whose resources
come from N origins, each its own name (originK.pqbench.test), its own address in the server namespace and its
own certificate, served by nginx on our OpenSSL.

    pages     what a page is: its origins and its resources (document, stylesheets, scripts, images)
    content   the files of a page on disk: its document naming every resource by its origin's URL
    origins   a further origin's certificate (a leaf for its name from the site chain's CA)
    serve     a run's pages made as its server starts: addresses, leaves, files, the nginx server blocks' input
    axis      the webpage axis (single, origins-N)
"""
