; Definitions that tree-sitter-javascript's bundled tags query leaves out.
; Appended for JavaScript, TypeScript and TSX alike, so only nodes all three grammars share.

; Top-level `const`/`let`/`var` bindings (the bundled query has only those bound to functions).
(program
    (lexical_declaration
        (variable_declarator
            name: (identifier) @name) @definition.constant))

(program
    (variable_declaration
        (variable_declarator
            name: (identifier) @name) @definition.variable))

(program
    (export_statement
        declaration: (lexical_declaration
            (variable_declarator
                name: (identifier) @name) @definition.constant)))

(program
    (export_statement
        declaration: (variable_declaration
            (variable_declarator
                name: (identifier) @name) @definition.variable)))
