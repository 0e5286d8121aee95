; Definitions that tree-sitter-go's bundled tags query leaves out or matches without a
; `@definition` capture (its const, var and struct patterns).

(source_file
    (const_declaration
        (const_spec
            name: (identifier) @name) @definition.constant))

(source_file
    (var_declaration
        (var_spec
            name: (identifier) @name) @definition.variable))

; `type A = B`
(type_alias
    name: (type_identifier) @name) @definition.type

(field_declaration
    name: (field_identifier) @name) @definition.field

; Methods declared in an interface.
(method_elem
    name: (field_identifier) @name) @definition.method
