; Definitions that tree-sitter-c's bundled tags query leaves out.

(preproc_def
    name: (identifier) @name) @definition.constant

(preproc_function_def
    name: (identifier) @name) @definition.macro

; A union at the top level is not a `declaration`, which the bundled pattern for unions requires.
(union_specifier
    name: (type_identifier) @name
    body: (_)) @definition.class

; Global variables, with or without an initializer, plain, pointer or array (`*names[]` is a
; pointer declarator around an array declarator).
(translation_unit
    (declaration
        declarator: [
            (identifier) @name
            (pointer_declarator declarator: (identifier) @name)
            (array_declarator declarator: (identifier) @name)
            (pointer_declarator declarator: (array_declarator declarator: (identifier) @name))
        ]) @definition.variable)

(translation_unit
    (declaration
        declarator: (init_declarator
            declarator: [
                (identifier) @name
                (pointer_declarator declarator: (identifier) @name)
                (array_declarator declarator: (identifier) @name)
                (pointer_declarator declarator: (array_declarator declarator: (identifier) @name))
            ])) @definition.variable)

; Struct and union members, plain, pointer or array.
(field_declaration
    declarator: (field_identifier) @name) @definition.field

(field_declaration
    declarator: (pointer_declarator
        declarator: (field_identifier) @name)) @definition.field

(field_declaration
    declarator: (array_declarator
        declarator: (field_identifier) @name)) @definition.field
