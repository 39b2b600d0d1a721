"""Genesis World's option constants, for scripts that name them (`gs.constraint_solver.Newton`,
`gs.integrator.implicitfast`). Each is a string the solvers' options read: the rigid solver maps the integrators
onto its own ("euler": semi-implicit Euler with implicit damping, springs and PD gains, as MuJoCo's implicitfast;
"rk4") and solves its constraints by projected Gauss-Seidel, its velocity pass accelerated by conjugate gradients
where CG is named."""


class constraint_solver:  # noqa: N801 (Genesis World's name)
    CG = "CG"
    Newton = "Newton"


class integrator:  # noqa: N801
    Euler = "euler"
    implicitfast = "implicitfast"
    approximate_implicitfast = "approximate_implicitfast"
    RK4 = "rk4"
